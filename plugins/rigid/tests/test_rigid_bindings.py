"""The rigid kernels take their arrays by parameter name (genesis_core.launch.Launcher.bind): every kernel's
signature against what the solver binds, in plain and differentiable mode."""

import pytest

import genesis_core as gs
from genesis_core.launch import binding_problems, kernel_parameters

from genesis_rigid import kernels_step


def _kernels():
    import taichi as ti

    return [k for k in vars(kernels_step).values() if isinstance(getattr(k, "_primal", None),
                                                                  ti.lang.kernel_impl.Kernel)]


def test_every_kernel_and_its_serial_copy_have_the_same_parameters():
    kernels = _kernels()
    assert {k._primal.func.__name__ for k in kernels} >= {"kinematics", "collide", "collide_meshes", "substep",
                                                          "collider_geometry", "substep_reverse_head",
                                                          "substep_reverse_dynamics", "substep_reverse_kinematics",
                                                          "collider_geometry_reverse"}
    for k in kernels:
        serial = kernels_step.SERIAL_OF[k]
        assert [n for n, _ in kernel_parameters(serial)] == [n for n, _ in kernel_parameters(k)]


@pytest.mark.parametrize("requires_grad", [False, True])
def test_every_kernel_binds_to_the_solver_arrays_by_name(gs_runtime, requires_grad):
    """kernel_arrays() (with the adjoints, the state's gradients and the collider view's arrays where a kernel
    takes them) holds an array of the right number of dimensions for every array parameter of every kernel: a
    parameter renamed on one side, or a state field the kernels read under another name, fails here by name."""
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=0.01, requires_grad=requires_grad))
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(pos=(0, 0, 0.2), size=(0.1, 0.1, 0.1)))
    scene.build(n_envs=2)
    scene.step()
    solver = scene.rigid_solver
    view = solver.collider_view(solver.frame)
    arrays = dict(solver.kernel_arrays())
    outputs = ("geom_pos", "geom_quat", "body_com", "body_lin_vel", "body_ang_vel")
    arrays.update({name: getattr(view, name) for name in outputs})
    if requires_grad:  # (the reverse kernels run in differentiable mode only)
        arrays.update(solver.adjoint)
        # the gradients have their tensors' shapes (G_<field>; the view's G_<output>)
        arrays.update({f"G_{name}": solver.state.tensors[name] for name in solver.GRAD_FIELDS})
        arrays.update({f"G_{name}": getattr(view, name) for name in outputs + ("body_quat",)})
    for k in _kernels():
        name = k._primal.func.__name__
        if "reverse" in name and not requires_grad:
            continue
        assert binding_problems(k, arrays) == [], name
