"""TemperatureGrid: the temperature field of a rigid link on a grid of cells over its bounding box, heated and cooled
by conduction inside the link, by contacts with other links, by convection and radiation to the ambient and by heat
generation; read through the sensing element's first-order lag and the measurement model.

The state (the sensor manager's declared `aux` field, so snapshots, reset(envs_idx) and checkpoints carry it):
each sensor's cell temperatures T and its sensing element's temperatures T_f (Celsius, `nx * ny * nz` each, cell
(i, j, k) at i * ny * nz + j * nz + k), and, in the run of the scene's first TemperatureGrid, the lumped temperature
of every other link with properties when `simulate_all_link_temperatures`. Each `scene.step()` of dt advances it in
Genesis World's order of stages, batched over environments with torch operations (nothing read on the host):

1. conduction inside each grid: the finite-volume system C dT/dt = -L T (C = rho c V_cell per cell; L the
   conductances k A_face / dx between face neighbours, none across the bounding box's faces: zero flux), integrated
   exactly over dt in its eigenbasis. L is diagonalised by the orthonormal DCT-II along each axis, with eigenvalues
   (k / rho c) (2 / dx)^2 sin^2(pi m / (2 n)) (m = 0 .. n-1): T <- D^T exp(-dt Lambda) D T. Unconditionally stable
   and conservative (the mean, m = 0, is untouched); the first mode decays at
   alpha (2 n / L)^2 sin^2(pi / (2 n)) = pi^2 alpha / L^2 (1 - O(1 / n^2)).
2. heat generation: T += dt q / (rho c dz) per cell (q W/m^2 over the cell's x-y face, Genesis World's unit).
3. contact conduction: each valid contact whose two links both have properties couples two nodes: the cell of the
   sensorised link that holds the contact point, the lumped temperature of a simulated link, or a link held at its
   base temperature (a reservoir, infinite capacity). Its conductance is Genesis World's
   G = k_eff A / l with k_eff = 2 k_a k_b / (k_a + k_b), A = max(A_pair / n_pair, pi w d) (A_pair: the polygon
   spanned by the n_pair >= 3 contact points of the same link pair, projected on their mean normal's plane,
   else the sum of pi d over them; w: the sensor's contact_depth_weight, d the contact's depth) and
   l = (V_a / A + V_b / A) / 2 (V: the node's volume; a reservoir counts the other side's). The exchange is
   semi-implicit and conservative: Q = dt G f (T_a - T_b) leaves a and enters b, with
   f = 1 / (1 + dt (S_a / C_a + S_b / C_b)) (S: the sum of the conductances at a node): backward Euler for a single
   pair, and for any number of contacts every node's new temperature is a convex combination of the old ones, so no
   dt can make it overshoot or oscillate.
4. convection and radiation on the exposed faces of the grid's boundary cells (and a lumped link's bounding box):
   C dT/dt = -A_s (h (T - T_amb) + eps sigma (T_K^4 - T_amb,K^4)), written h_r = eps sigma (T_K^2 + T_amb,K^2)
   (T_K + T_amb,K) so that the right-hand side is -A_s (h + h_r) (T - T_amb), and integrated with h_r frozen at the
   start of the step: T <- T_amb + (T - T_amb) exp(-dt A_s (h + h_r) / C) (exact for convection alone; never
   crosses T_amb).
5. the sensing element: T_f <- T_f + (1 - exp(-dt / tau)) (T - T_f) (exact for T constant over the step).

read() is T_f through the measurement model (delay, noise, bias, resolution); read_ground_truth() is T.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import OptionError
from ..geoms import GeomKind
from ..launch import torch_one_thread
from ..rotations import quat_to_mat
from .base import Sensor, gather_links, link_groups, register
from .options import TemperatureGrid, per_channel

STEFAN_BOLTZMANN = 5.670374419e-8  # W / (m^2 K^4)
KELVIN = 273.15
DEFAULT_AMBIENT = 21.0  # Celsius, Genesis World's
DEFAULT_CONVECTION = 1.0  # W / (m^2 K), Genesis World's
NOISY = ("resolution", "bias", "noise", "random_walk")
DENSE_CELLS = 1024  # grids up to this many cells conduct through one dense N x N matrix, larger ones axis by axis


def link_bounds(link):
    """The bounding box of a rigid link's collision geoms in the link frame, (lo, hi) as two (3,) arrays, m; None
    when it has no bounded geom (a plane). Primitives are bounded exactly (a box, a cylinder or an ellipsoid
    rotated in the link), meshes by their collision hull's vertices."""
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in link.geoms:
        kind = GeomKind(int(g.type))
        size = np.asarray(g.size, dtype=np.float64)
        p, rot = np.asarray(g.init_pos, dtype=np.float64), quat_to_mat(np.asarray(g.init_quat, dtype=np.float64))
        if kind == GeomKind.PLANE:
            continue
        if kind == GeomKind.MESH:
            verts = getattr(g, "init_verts", None)
            if verts is None or not len(verts):
                continue
            pts = p + np.asarray(verts, dtype=np.float64) @ rot.T
            lo, hi = np.minimum(lo, pts.min(0)), np.maximum(hi, pts.max(0))
            continue
        if kind == GeomKind.SPHERE:
            half = np.full(3, size[0])
        elif kind == GeomKind.CAPSULE:
            half = np.abs(rot[:, 2]) * size[1] + size[0]
        elif kind == GeomKind.CYLINDER:  # the axis' extent plus the rim circle's
            half = np.abs(rot[:, 2]) * size[1] + size[0] * np.sqrt(np.clip(1.0 - rot[:, 2] ** 2, 0.0, None))
        elif kind == GeomKind.BOX:
            half = np.abs(rot) @ size[:3]
        else:  # ellipsoid: along axis i, sqrt(sum_j (R_ij r_j)^2)
            half = np.sqrt(((rot * size[:3]) ** 2).sum(1))
        lo, hi = np.minimum(lo, p - half), np.maximum(hi, p + half)
    if not np.isfinite(lo).all():
        return None
    return lo, hi


def _solid_bounds(link):
    """link_bounds, or None when the box is flat (no volume to hold heat)."""
    b = link_bounds(link)
    return b if b is not None and bool(np.all(b[1] - b[0] > 0)) else None


def _merged(options_list):
    """The settings Genesis World shares between all TemperatureGrid sensors: the merged properties_dict (later
    entries win), the last ambient temperature and convection coefficient given, simulate_all if any says so."""
    props, ambient, h = {}, DEFAULT_AMBIENT, DEFAULT_CONVECTION
    for o in options_list:
        props.update(o.properties_dict)
        ambient = o.ambient_temperature if o.ambient_temperature is not None else ambient
        h = o.convection_coefficient if o.convection_coefficient is not None else h
    return props, ambient, h, any(o.simulate_all_link_temperatures for o in options_list)


def _dct_basis(n: int, dx: float):
    """The orthonormal DCT-II matrix D (n x n, rows: modes) and the eigenvalues (2 / dx)^2 sin^2(pi m / (2 n)) of the
    zero-flux finite-volume Laplacian -d^2/dx^2 on n cells of width dx, which D diagonalises."""
    m, i = np.arange(n)[:, None], np.arange(n)[None, :]
    d = np.cos(np.pi * m * (i + 0.5) / n) * np.sqrt(2.0 / n)
    d[0] = np.sqrt(1.0 / n)
    lam = (2.0 / dx) ** 2 * np.sin(np.pi * np.arange(n) / (2 * n)) ** 2
    return d, lam


class _Plan:
    """What build decides once for all TemperatureGrid sensors of a scene (plain Python and NumPy)."""

    def __init__(self, manager, sensors):
        solver = sensors[0].entity.solver
        for s in sensors:
            if s.entity.solver is not solver:
                raise OptionError("add_sensor: TemperatureGrid sensors on entities of two rigid solvers cannot "
                                  "exchange heat; attach them to one solver's entities.")
        self.entities = [e for e in manager.scene.entities
                         if getattr(e, "solver", None) is solver and hasattr(e, "link_start")]
        self.n_links = max((e.link_start + e.n_links for e in self.entities), default=0)
        props, self.ambient, self.h, self.simulate_all = _merged([s.options for s in sensors])
        bad = [k for k in props if k >= self.n_links]
        if bad:
            raise OptionError(f"TemperatureGrid.properties_dict has link index {bad[0]}, but the rigid solver has "
                              f"{self.n_links} links (indices 0 .. {self.n_links - 1}, e.g. entity.base_link_idx; "
                              "-1: every link not listed).")
        self.props = [props.get(l, props.get(-1)) for l in range(self.n_links)]
        self.link_of = {}  # global link index -> RigidLink
        for e in self.entities:
            for l in range(e.n_links):
                self.link_of[e.link_start + l] = e.links[l]
        self.sensor_links = [s.entity.link_start + s.link_idx_local for s in sensors]
        self.bounds = {l: _solid_bounds(self.link_of[l]) for l in range(self.n_links)
                       if self.props[l] is not None and l in self.link_of}
        sensorised = set(self.sensor_links)
        self.lumped = ([l for l in range(self.n_links) if l not in sensorised and self.bounds.get(l) is not None]
                       if self.simulate_all else [])

    def base_temperature(self, link: int) -> float:
        p = self.props[link]
        return self.ambient if p is None else p.base_temperature


@register(TemperatureGrid)
class TemperatureGridSensor(Sensor):
    """A TemperatureGrid on a rigid link (see the module's docstring for the model). `read()` and
    `read_ground_truth()` give `([n_envs,] nx, ny, nz)`, Celsius; `link_temperatures` every link's."""

    noisy = True  # its channel_model gives resolution, bias, noise and random_walk per cell (the model's setters)

    @classmethod
    def channel_count(cls, options) -> int:
        return options.n_cells

    @classmethod
    def aux_count(cls, options) -> int:
        return 2 * options.n_cells  # the cells' temperatures, the sensing element's

    def _format(self, x):
        return x.reshape(*x.shape[:-1], *self.options.grid_size)

    @classmethod
    def check(cls, manager, options, entity):
        for key in NOISY:
            per_channel(options, key, options.n_cells)
        links = getattr(entity, "links", None)
        if links is None:
            raise OptionError(f"add_sensor: TemperatureGrid(entity_idx={options.entity_idx}): the entity lists no "
                              "links with collision geoms (entity.links[i].geoms) to lay a grid over.")
        if _solid_bounds(links[options.link_idx_local]) is None:
            raise OptionError(f"add_sensor: TemperatureGrid(entity_idx={options.entity_idx}, link_idx_local="
                              f"{options.link_idx_local}): the link has no bounded collision geometry with a volume "
                              "(a plane, no geoms) to lay a grid over.")
        others = [s for s in manager.sensors if isinstance(s, cls)]
        if any(s.entity is entity and s.link_idx_local == options.link_idx_local for s in others):
            raise OptionError(f"add_sensor: entity {options.entity_idx}'s link {options.link_idx_local} already has a "
                              "TemperatureGrid; one grid per link (it holds the link's heat).")
        props = _merged([s.options for s in others] + [options])[0]
        idx = entity.link_start + options.link_idx_local
        if idx not in props and -1 not in props:
            raise OptionError(f"add_sensor: TemperatureGrid.properties_dict gives no properties for the sensor's link "
                              f"(solver link index {idx}); add an entry {idx}: gs.sensors.TemperatureProperties(...), "
                              "or -1 for every link.")

    def channel_model(self) -> dict:
        o, n = self.options, self.n_channels
        model = {k: np.asarray(per_channel(o, k, n), dtype=np.float64) for k in NOISY}
        model["jitter"] = o.jitter
        return model

    # -- state -----------------------------------------------------------------------------------------------------

    def _first(self):
        return next(s for s in self._manager.sensors if isinstance(s, TemperatureGridSensor))

    def aux_count_at_build(self) -> int:
        """The owner (the scene's first TemperatureGrid) also holds the lumped temperatures of the simulated links."""
        first = self._first()
        if first is self:
            kind = [s for s in self._manager.sensors if isinstance(s, TemperatureGridSensor)]
            self._plan = _Plan(self._manager, kind)
            return 2 * self.options.n_cells + len(self._plan.lumped)
        self._plan = first._plan
        return 2 * self.options.n_cells

    def init_aux(self, aux: torch.Tensor):
        """Cells and sensing element at the link's base temperature; lumped links at theirs."""
        plan, n = self._plan, self.options.n_cells
        aux[:, :2 * n] = plan.base_temperature(self.entity.link_start + self.link_idx_local)
        if self._first() is self and plan.lumped:
            aux[:, 2 * n:] = torch.as_tensor([plan.base_temperature(l) for l in plan.lumped], dtype=aux.dtype,
                                             device=aux.device)

    # -- reading ---------------------------------------------------------------------------------------------------

    def _aux_now(self):
        m = self._manager
        return m.state.at("aux", m.frame)

    def read_ground_truth(self, envs_idx=None):
        """The cells' temperatures now, Celsius, `([n_envs,] nx, ny, nz)` (before the sensing element's lag and the
        measurement model; the build-time temperatures before the first step)."""
        m = self._manager
        m.scene._require_built("sensor.read_ground_truth()")
        envs = m.scene._sanitize_envs_idx(envs_idx)
        x = self._aux_now()[:, self._aux_start:self._aux_start + self.options.n_cells]
        x = x.clone() if envs is None else x[envs]
        return self._format(x if m.n_envs else x[0])

    @property
    def link_temperatures(self) -> torch.Tensor:
        """Every link of the rigid solver, `([n_envs,] n_links)`, Celsius: a sensorised link's mean cell
        temperature, a simulated link's lumped temperature, else its base temperature (the ambient for a link
        without properties). Shared by all TemperatureGrid sensors, as in Genesis World."""
        m = self._manager
        m.scene._require_built("sensor.link_temperatures")
        ctx = self._ctx
        aux = self._aux_now()
        out = ctx["link_base"].expand(aux.shape[0], -1).clone()
        if ctx["lumped_links"] is not None:
            out[:, ctx["lumped_links"]] = aux[:, ctx["lumped_aux"]]
        for s, link in zip(ctx["sensors"], ctx["plan"].sensor_links):
            out[:, link] = aux[:, s._aux_start:s._aux_start + s.options.n_cells].mean(dim=1)
        return out if m.n_envs else out[0]

    # -- build -----------------------------------------------------------------------------------------------------

    @classmethod
    def build_kind(cls, manager, sensors):
        dev, fl, dt = manager.device, manager.float_dtype, manager.sim_options.dt
        plan = sensors[0]._plan
        L = plan.n_links

        def t(x, dtype=fl):
            return torch.as_tensor(np.asarray(x), dtype=dtype, device=dev)

        # nodes: every sensor's cells, the lumped links, a reservoir per link (its base temperature), a dummy
        n_cells = [s.options.n_cells for s in sensors]
        cell_start = np.concatenate([[0], np.cumsum(n_cells)])[:-1].astype(np.int64)
        n_all_cells = int(sum(n_cells))
        lumped_node0 = n_all_cells
        reservoir0 = lumped_node0 + len(plan.lumped)
        dummy = reservoir0 + L
        n_nodes = dummy + 1
        inv_cap, vol, cond = np.zeros(n_nodes), np.zeros(n_nodes), np.zeros(n_nodes)
        surf, emis = np.zeros(n_nodes), np.zeros(n_nodes)
        base = np.full(n_nodes, plan.ambient)
        per_sensor = []
        for s, start in zip(sensors, cell_start):
            o, link = s.options, s.entity.link_start + s.link_idx_local
            p = plan.props[link]
            lo, hi = plan.bounds[link]
            grid = np.asarray(o.grid_size)
            voxel = (hi - lo) / grid
            v_cell = float(np.prod(voxel))
            rows = slice(start, start + o.n_cells)
            inv_cap[rows] = 1.0 / (p.density * p.specific_heat * v_cell)
            vol[rows], cond[rows], emis[rows] = v_cell, p.conductivity, p.emissivity
            # the exposed area of each cell: its faces on the bounding box's faces
            ix, iy, iz = np.meshgrid(*(np.arange(n) for n in grid), indexing="ij")
            face = (voxel[1] * voxel[2], voxel[0] * voxel[2], voxel[0] * voxel[1])
            exposed = sum(((i == 0).astype(float) + (i == n - 1)) * a for i, n, a in zip((ix, iy, iz), grid, face))
            surf[rows] = exposed.reshape(-1)
            alpha = p.conductivity / (p.density * p.specific_heat)
            conduction = None
            if o.n_cells > 1 and alpha > 0:
                bases = [_dct_basis(int(n), float(d)) for n, d in zip(grid, voxel)]
                lam = (bases[0][1][:, None, None] + bases[1][1][None, :, None] + bases[2][1][None, None, :])
                decay = np.exp(-dt * alpha * lam)
                if o.n_cells <= DENSE_CELLS:  # one matrix: D^T exp(-dt Lambda) D, D = Dx (x) Dy (x) Dz
                    d = np.kron(np.kron(bases[0][0], bases[1][0]), bases[2][0])
                    conduction = t(d.T @ (decay.reshape(-1)[:, None] * d)).T.contiguous()  # T_row @ K^T
                else:
                    conduction = (t(bases[0][0]), t(bases[1][0]), t(bases[2][0]), t(decay))
            hg = None
            if o.heat_generation is not None:
                q = np.broadcast_to(np.asarray(o.heat_generation, dtype=np.float64), tuple(grid))
                hg = t((dt * q / (p.density * p.specific_heat * voxel[2])).reshape(-1))
            tau = o.sensor_time_constant
            per_sensor.append(dict(rows=rows, grid=tuple(int(n) for n in grid), conduction=conduction, heat=hg,
                                   lag=1.0 if tau == 0 else -math.expm1(-dt / tau)))
        for j, l in enumerate(plan.lumped):
            p, (lo, hi) = plan.props[l], plan.bounds[l]
            ext = hi - lo
            v = float(np.prod(ext))
            n = lumped_node0 + j
            inv_cap[n], vol[n], cond[n], emis[n] = 1.0 / (p.density * p.specific_heat * v), v, p.conductivity, \
                p.emissivity
            surf[n] = 2.0 * (ext[0] * ext[1] + ext[1] * ext[2] + ext[2] * ext[0])
        # every link's node when it is not a sensor's: its lumped node, its reservoir, or the dummy (no properties)
        other_node = np.full(L + 1, dummy, dtype=np.int64)
        for l in range(L):
            if plan.props[l] is not None:
                other_node[l] = reservoir0 + l
                base[reservoir0 + l] = plan.props[l].base_temperature
                cond[reservoir0 + l] = plan.props[l].conductivity
                b = plan.bounds.get(l)
                vol[reservoir0 + l] = float(np.prod(b[1] - b[0])) if b is not None else 0.0
        for j, l in enumerate(plan.lumped):
            other_node[l] = lumped_node0 + j
        sensor_of_link = np.full(L + 1, -1, dtype=np.int64)
        weight_of_link = np.zeros(L + 1)
        for i, (s, l) in enumerate(zip(sensors, plan.sensor_links)):
            sensor_of_link[l] = i
            weight_of_link[l] = s.options.contact_depth_weight
        lo = np.stack([plan.bounds[l][0] for l in plan.sensor_links])
        grid = np.stack([s.options.grid_size for s in sensors])
        voxel = (np.stack([plan.bounds[l][1] for l in plan.sensor_links]) - lo) / grid

        def cols(idx):  # aux columns: a slice where they are contiguous (a view), else an index tensor
            idx = np.asarray(idx, dtype=np.int64)
            return slice(int(idx[0]), int(idx[-1]) + 1) if np.array_equal(idx, np.arange(idx[0], idx[-1] + 1)) \
                else t(idx, torch.long)

        def aux_cols(part):  # the aux columns of part 0 (cells) or 1 (sensing element) of every sensor
            return cols(np.concatenate([np.arange(s._aux_start + part * s.options.n_cells,
                                                  s._aux_start + (part + 1) * s.options.n_cells) for s in sensors]))

        owner = sensors[0]
        lumped_aux = (cols(np.arange(owner._aux_start + 2 * owner.options.n_cells, owner._aux_start + owner.n_aux))
                      if plan.lumped else None)
        groups, perm = link_groups(sensors, dev)
        link_base = np.array([plan.base_temperature(l) for l in range(L)])
        ctx = dict(
            plan=plan, sensors=list(sensors), groups=groups, perm=perm, per_sensor=per_sensor, dt=dt,
            n_all_cells=n_all_cells, n_lumped=len(plan.lumped), dummy=dummy, n_nodes=n_nodes,
            cells_aux=aux_cols(0), element_aux=aux_cols(1), lumped_aux=lumped_aux,
            lumped_links=t(plan.lumped, torch.long) if plan.lumped else None,
            lag=torch.cat([torch.full((s.options.n_cells,), ps["lag"], dtype=fl, device=dev)
                           for s, ps in zip(sensors, per_sensor)]),
            inv_cap=t(inv_cap), surf=t(surf), emis=t(emis), fixed=t(base[reservoir0:]),
            cell_start=t(cell_start[:, None], torch.long), other_node=t(other_node, torch.long),
            sensor_of_link=t(sensor_of_link, torch.long), weight_of_link=t(weight_of_link),
            box_lo=t(lo), inv_voxel=t(1.0 / voxel), grid_last=t(grid - 1, torch.long),
            cell_stride=t(np.stack([grid[:, 1] * grid[:, 2], grid[:, 2], np.ones(len(grid), dtype=np.int64)], 1),
                          torch.long),
            node_table=t(np.stack([inv_cap, cond, vol], 1)), link_base=t(link_base),
            ambient=plan.ambient, h=plan.h, any_radiation=bool((emis > 0).any()),
            solver=sensors[0].entity.solver, n_links=L,
        )
        # the contacts: one call of the rigid solver's batched pool where it offers one, else each entity's
        # get_contacts (Genesis World's accessor), each contact taken from the first entity of its two
        ctx["solver_contacts"] = callable(getattr(ctx["solver"], "contacts", None))
        relevant = [e for e in plan.entities if any(plan.props[e.link_start + l] is not None for l in range(e.n_links))]
        rank = np.full(L + 1, len(relevant), dtype=np.int64)
        for r, e in enumerate(relevant):
            rank[e.link_start:e.link_start + e.n_links] = r
        ctx["contact_entities"], ctx["rank_of_link"] = relevant, t(rank, torch.long)
        for s in sensors:
            s._ctx = ctx
        return ctx

    # -- a step ----------------------------------------------------------------------------------------------------

    @classmethod
    def measure_kind(cls, manager, sensors, ctx):
        """Advance every grid and lumped link by one step (module docstring, stages 1-5) in the manager's `aux`,
        and return the sensing elements' temperatures, [B, total cells]. (torch on one thread: its small ops wait
        on its own thread pool beside Taichi's, launch.torch_one_thread.)"""
        with torch_one_thread():
            return cls._advance(manager, ctx)

    @classmethod
    def _advance(cls, manager, ctx):
        dt, fl = ctx["dt"], manager.float_dtype
        aux = manager.state.at("aux", manager.frame)
        B = aux.shape[0]
        parts = [aux[:, ctx["cells_aux"]]]
        if ctx["lumped_aux"] is not None:
            parts.append(aux[:, ctx["lumped_aux"]])
        parts.append(ctx["fixed"].expand(B, -1))
        temp = torch.cat(parts, dim=1)  # [B, n_nodes]: cells, lumped links, reservoirs, dummy

        # 1-2: conduction inside each grid, heat generation
        for ps in ctx["per_sensor"]:
            rows = ps["rows"]
            op = ps["conduction"]
            if torch.is_tensor(op):
                temp[:, rows] = temp[:, rows] @ op
            elif op is not None:
                dx, dy, dz, decay = op
                cells = temp[:, rows].reshape(B, *ps["grid"])
                modes = _along_axes(cells, dx, dy, dz) * decay
                temp[:, rows] = _along_axes(modes, dx.T, dy.T, dz.T).reshape(B, -1)
            if ps["heat"] is not None:
                temp[:, rows] += ps["heat"]

        # 3: contact conduction
        temp = cls._exchange(manager, ctx, temp)

        # 4: convection and radiation to the ambient
        t_amb = ctx["ambient"]
        coeff = ctx["h"] + torch.zeros_like(temp)
        if ctx["any_radiation"]:
            tk, ak = (temp + KELVIN).clamp(min=0.0), t_amb + KELVIN
            coeff = coeff + ctx["emis"] * STEFAN_BOLTZMANN * (tk * tk + ak * ak) * (tk + ak)
        temp = t_amb + (temp - t_amb) * torch.exp(-dt * ctx["surf"] * ctx["inv_cap"] * coeff)

        # 5: the sensing element's lag; write the state back
        n = ctx["n_all_cells"]
        element = aux[:, ctx["element_aux"]]
        element = element + ctx["lag"] * (temp[:, :n] - element)
        aux[:, ctx["cells_aux"]] = temp[:, :n].to(aux.dtype)
        aux[:, ctx["element_aux"]] = element.to(aux.dtype)
        if ctx["lumped_aux"] is not None:
            aux[:, ctx["lumped_aux"]] = temp[:, n:n + ctx["n_lumped"]].to(aux.dtype)
        return element.to(fl)

    @classmethod
    def _contacts(cls, manager, ctx):
        """The contacts of the last substep: link_a, link_b [B, C] (invalid entries: n_links), position, normal
        [B, C, 3], depth [B, C], valid [B, C]."""
        L = ctx["n_links"]
        if ctx["solver_contacts"]:
            c = ctx["solver"].contacts()
            found = [(c, c["valid"])]
        else:
            found = []
            for r, e in enumerate(ctx["contact_entities"]):
                c = e.get_contacts()
                if not manager.n_envs:
                    c = {k: x.unsqueeze(0) for k, x in c.items() if torch.is_tensor(x)}
                    valid = torch.ones_like(c["link_a"], dtype=torch.bool)
                else:
                    valid = c["valid_mask"]
                rank = ctx["rank_of_link"]
                la, lb = c["link_a"].long().clamp(0, L), c["link_b"].long().clamp(0, L)
                found.append((c, valid & (torch.minimum(rank[la], rank[lb]) == r)))
        out = []
        for c, valid in found:
            la = torch.where(valid, c["link_a"].long(), L)
            lb = torch.where(valid, c["link_b"].long(), L)
            pos = torch.where(valid[..., None], c["position"].to(manager.float_dtype), 0.0)
            normal = torch.where(valid[..., None], c["normal"].to(manager.float_dtype), 0.0)
            depth = c.get("penetration")
            depth = (torch.zeros_like(pos[..., 0]) if depth is None
                     else torch.where(valid, depth.to(manager.float_dtype), 0.0))
            out.append((la, lb, pos, normal, depth, valid))
        if len(out) == 1:
            return out[0]
        return tuple(torch.cat(x, dim=1) for x in zip(*out))

    @classmethod
    def _exchange(cls, manager, ctx, temp):
        """Stage 3: the conservative semi-implicit contact exchange between nodes (module docstring)."""
        la, lb, pos, normal, depth, valid = cls._contacts(manager, ctx)
        if la.shape[1] == 0:
            return temp
        dt, dummy = ctx["dt"], ctx["dummy"]
        area = _contact_areas(la, lb, pos, normal, depth, valid, ctx["n_links"])
        weight = torch.maximum(ctx["weight_of_link"][la], ctx["weight_of_link"][lb])
        area = torch.maximum(area, math.pi * weight * depth.clamp(min=0.0))
        cells = cls._cells(manager, ctx, pos, temp.dtype)
        node_a, node_b = cls._node(ctx, la, cells), cls._node(ctx, lb, cells)
        # per side: 1 / capacity, conductivity, volume (one gather each from the node table)
        inv_a, k_a, v_a = ctx["node_table"].index_select(0, node_a.reshape(-1)).view(*node_a.shape, 3).unbind(-1)
        inv_b, k_b, v_b = ctx["node_table"].index_select(0, node_b.reshape(-1)).view(*node_b.shape, 3).unbind(-1)
        k_sum = k_a + k_b
        k_eff = 2.0 * k_a * k_b / torch.where(k_sum > 0, k_sum, 1.0)
        v_a, v_b = torch.where(inv_a > 0, v_a, v_b), torch.where(inv_b > 0, v_b, v_a)  # a reservoir: the other's
        active = (valid & (node_a != dummy) & (node_b != dummy) & (node_a != node_b) & ((inv_a > 0) | (inv_b > 0))
                  & (area > 0) & (v_a + v_b > 0))
        g = torch.where(active, 2.0 * k_eff * area * area / torch.where(active, v_a + v_b, 1.0), 0.0)  # W/K
        total = torch.zeros_like(temp).scatter_add_(1, node_a, g).scatter_add_(1, node_b, g)
        damp = 1.0 / (1.0 + dt * (total.gather(1, node_a) * inv_a + total.gather(1, node_b) * inv_b))
        heat = dt * g * damp * (temp.gather(1, node_a) - temp.gather(1, node_b))  # J, from a to b
        delta = torch.zeros_like(temp).scatter_add_(1, node_a, -heat).scatter_add_(1, node_b, heat)
        return temp + ctx["inv_cap"] * delta

    @classmethod
    def _cells(cls, manager, ctx, pos, dtype):
        """[B, S, C]: the node of the cell of sensor s's grid that holds each contact point (clamped into the
        grid), from the sensors' link poses."""
        link_pos = gather_links(manager, ctx["groups"], ctx["perm"], lambda e, l: e.get_links_pos(l)).to(dtype)
        link_quat = gather_links(manager, ctx["groups"], ctx["perm"], lambda e, l: e.get_links_quat(l)).to(dtype)
        rot = quat_to_mat(link_quat)  # [B, S, 3, 3], link to world
        d = pos[:, None] - link_pos[:, :, None]  # [B, S, C, 3]
        local = torch.matmul(d, rot)  # rows d^T R = (R^T d)^T: the link frame
        ijk = ((local - ctx["box_lo"][:, None]) * ctx["inv_voxel"][:, None]).clamp(min=0.0).long()
        ijk = torch.minimum(ijk, ctx["grid_last"][:, None]).clamp(min=0)
        stride = ctx["cell_stride"][:, None]
        return ctx["cell_start"] + ijk[..., 0] * stride[..., 0] + ijk[..., 1] * stride[..., 1] + ijk[..., 2]

    @classmethod
    def _node(cls, ctx, link, cells):
        """The node of each contact's side on `link` [B, C]: the cell holding the point on a sensorised link, else
        the link's lumped, reservoir or dummy node."""
        s = ctx["sensor_of_link"][link]
        cell = cells[:, 0] if cells.shape[1] == 1 else cells.gather(1, s.clamp(min=0)[:, None]).squeeze(1)
        return torch.where(s >= 0, cell, ctx["other_node"][link])


def _dot(a, b):
    """a . b over the last axis (3), as three products: cheaper than a reduction over an axis of 3."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _along_axes(x, mx, my, mz):
    """x [B, nx, ny, nz] with each axis multiplied by its matrix (one axis at a time: O(N (nx + ny + nz)))."""
    x = torch.einsum("xi,bijk->bxjk", mx, x)
    x = torch.einsum("yj,bxjk->bxyk", my, x)
    return torch.einsum("zk,bxyk->bxyz", mz, x)


def _contact_areas(la, lb, pos, normal, depth, valid, n_links):
    """Genesis World's contact area [B, C]: the contacts of one (link_a, link_b) pair share their group's area, the
    polygon of their points (sorted by angle about their centroid, in the plane of their mean normal) when there are
    3 or more, else the sum of pi * depth over them; 0 for invalid entries. Batched with sorts and scatters."""
    B, C = la.shape
    fl, dev = pos.dtype, pos.device
    ones = valid.to(fl)
    key = torch.where(valid, la * (n_links + 1) + lb, (n_links + 1) ** 2)
    key_sorted, order = torch.sort(key, dim=1, stable=True)
    starts = torch.ones_like(key_sorted, dtype=torch.bool)
    starts[:, 1:] = key_sorted[:, 1:] != key_sorted[:, :-1]
    gid = torch.empty_like(order).scatter_(1, order, starts.long().cumsum(1) - 1)  # each contact's group
    count = torch.zeros(B, C, dtype=fl, device=dev).scatter_add_(1, gid, ones)
    gid3 = gid[..., None].expand(-1, -1, 3)
    centre = torch.zeros(B, C, 3, dtype=fl, device=dev).scatter_add_(1, gid3, pos * ones[..., None])
    centre = (centre / count.clamp(min=1.0)[..., None]).gather(1, gid3)
    nrm = torch.zeros(B, C, 3, dtype=fl, device=dev).scatter_add_(1, gid3, normal * ones[..., None]).gather(1, gid3)
    nrm = nrm / (_dot(nrm, nrm).sqrt() + 1e-30)[..., None]
    # an in-plane basis (u, v), u from the x axis unless the normal is near it (then y), as Genesis World
    near_x = (nrm[..., :1].abs() >= 0.9).to(fl)
    e = torch.cat([1.0 - near_x, near_x, torch.zeros_like(near_x)], dim=-1)
    u = e - _dot(e, nrm)[..., None] * nrm
    u = u / (_dot(u, u).sqrt() + 1e-30)[..., None]
    r = pos - centre
    (n0, n1, n2), (u0, u1, u2), (r0, r1, r2) = nrm.unbind(-1), u.unbind(-1), r.unbind(-1)
    x = r0 * u0 + r1 * u1 + r2 * u2
    y = r0 * (n1 * u2 - n2 * u1) + r1 * (n2 * u0 - n0 * u2) + r2 * (n0 * u1 - n1 * u0)  # along v = n x u
    # sort by angle, then stably by group: each group's points become one contiguous run in angular order
    by_angle = torch.sort(torch.atan2(y, x), dim=1, stable=True).indices
    by_group = torch.sort(gid.gather(1, by_angle), dim=1, stable=True).indices
    order2 = by_angle.gather(1, by_group)
    xs, ys, gs_, vs = x.gather(1, order2), y.gather(1, order2), gid.gather(1, order2), ones.gather(1, order2)
    first = (count.cumsum(1) - count).long()  # each group's first slot in that order
    g_first, g_count = first.gather(1, gs_), count.gather(1, gs_).long()
    slot = torch.arange(C, device=dev).expand(B, -1)
    nxt = torch.where(slot + 1 < g_first + g_count, slot + 1, g_first)
    cross = (xs * ys.gather(1, nxt) - xs.gather(1, nxt) * ys) * vs
    polygon = 0.5 * torch.zeros(B, C, dtype=fl, device=dev).scatter_add_(1, gs_, cross).abs()
    by_depth = torch.zeros(B, C, dtype=fl, device=dev).scatter_add_(1, gid, math.pi * depth.clamp(min=0.0) * ones)
    group_area = torch.where(count >= 3, polygon, by_depth)
    return torch.where(valid, (group_area / count.clamp(min=1.0)).gather(1, gid), 0.0)


__all__ = ["TemperatureGridSensor", "link_bounds"]
