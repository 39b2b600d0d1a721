"""Plot benchmark tables to a PNG: for every scene of every table, the throughput against the number of
environments (ours, the anchor's, and any other engine's in the table; log-log) and below it the ratio ours /
anchor (ours / another engine dashed), from the JSON files that the benchmarks write with --json
(benchmarks/common.py: write_json).

    python benchmarks/sph.py --envs 1 8 64 --json sph.json     # (and pbd.py, fem.py, rigid.py, render.py, mpm.py)
    python benchmarks/plot.py sph.json pbd.json -o benchmarks.png [--title TEXT] [--columns 4] [--dpi 100]

One environment built unbatched (rigid.py's n_envs 0) is plotted at 1 and labelled with its own n_envs.
"""

import argparse
import json
import math
import os
import sys


class TableError(ValueError):
    """A file that is not a table written by write_json."""


def load(path):
    """The table in `path` (write_json's layout), checked: a dict with benchmark, unit and rows of scene, n_envs,
    ours, anchor (numbers or None) and optionally others ({name: number})."""
    try:
        with open(path) as fh:
            table = json.load(fh)
    except (OSError, ValueError) as e:
        raise TableError(f"{path}: not readable as JSON ({e})") from None

    def number(x):
        return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0)

    if not isinstance(table, dict) or not isinstance(table.get("rows"), list) or "unit" not in table:
        raise TableError(f"{path}: expected an object with 'unit' and 'rows' (benchmarks' --json output)")
    for i, r in enumerate(table["rows"]):
        ok = (isinstance(r, dict) and isinstance(r.get("scene"), str) and isinstance(r.get("n_envs"), int)
              and r["n_envs"] >= 0 and number(r.get("ours")) and number(r.get("anchor"))
              and isinstance(r.get("others", {}), dict) and all(number(v) for v in r.get("others", {}).values()))
        if not ok:
            raise TableError(f"{path}: row {i} is not {{scene: str, n_envs: int >= 0, ours, anchor: number or null, "
                             f"[others: {{name: number}}]}}: {r!r:.200}")
    table.setdefault("benchmark", os.path.splitext(os.path.basename(path))[0])
    table.setdefault("title", table["benchmark"])
    table.setdefault("anchor", "anchor")
    return table


def panels(tables):
    """[(table, scene, rows sorted by n_envs)] in the tables' order, scenes in order of first appearance."""
    out = []
    for table in tables:
        scenes = list(dict.fromkeys(r["scene"] for r in table["rows"]))
        for scene in scenes:
            rows = sorted((r for r in table["rows"] if r["scene"] == scene), key=lambda r: r["n_envs"])
            out.append((table, scene, rows))
    return out


def plot(tables, out, title=None, columns=4, dpi=100):
    """Draw the tables' panels (throughput above, ratio below) into the PNG `out`; returns the number of panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    items = panels(tables)
    if not items:
        raise TableError("no rows to plot")
    cols = max(1, min(columns, len(items)))
    grid_rows = math.ceil(len(items) / cols)
    fig = plt.figure(figsize=(3.6 * cols, 4.4 * grid_rows + (0.4 if title else 0)), dpi=dpi)
    outer = fig.add_gridspec(grid_rows, cols, hspace=0.3, wspace=0.4)
    for k, (table, scene, rows) in enumerate(items):
        cell = outer[divmod(k, cols)].subgridspec(2, 1, height_ratios=[3, 1.3], hspace=0.08)
        top = fig.add_subplot(cell[0])
        bottom = fig.add_subplot(cell[1], sharex=top)
        x = [max(r["n_envs"], 1) for r in rows]
        series = [("ours", [r.get("ours") for r in rows], dict(color="C0", marker="o", lw=2))]
        if any(r.get("anchor") is not None for r in rows):
            series.append((table["anchor"] or "anchor", [r.get("anchor") for r in rows],
                           dict(color="C1", marker="s")))
        others = list(dict.fromkeys(name for r in rows for name in r.get("others", {})))
        for i, name in enumerate(others):
            series.append((name, [r.get("others", {}).get(name) for r in rows],
                           dict(color=f"C{i + 2}", marker="^", ls="--")))
        for label, ys, style in series:
            pts = [(a, b) for a, b in zip(x, ys) if b]
            if pts:
                top.plot(*zip(*pts), label=label, **style)
        top.set_xscale("log")
        top.set_yscale("log")
        top.set_title(f"{table['benchmark']}: {scene}", fontsize=10)
        top.set_ylabel(table["unit"], fontsize=8)
        top.grid(True, which="both", alpha=0.3)
        top.legend(fontsize=7, loc="best")
        top.tick_params(which="both", labelbottom=False, labelsize=7)
        ratios = []
        for label, ys, style in series[1:]:
            pts = [(a, o / b) for a, o, b in zip(x, (r.get("ours") for r in rows), ys) if o and b]
            if pts:
                ratios += [q for _, q in pts]
                bottom.plot(*zip(*pts), color=style["color"], marker=style["marker"], ls=style.get("ls", "-"))
                for a, q in pts:
                    bottom.annotate(f"{q:.2f}x", (a, q), textcoords="offset points", xytext=(0, 4), ha="center",
                                    fontsize=7, color=style["color"])
        bottom.axhline(1.0, color="0.5", lw=0.8)
        bottom.set_ylabel("ours / other", fontsize=8)
        if not ratios:
            bottom.text(0.5, 0.5, "no anchor in this table", transform=bottom.transAxes, ha="center", va="center",
                        fontsize=8, color="0.4")
        bottom.set_ylim(0, max(ratios + [1.0]) * 1.35)
        bottom.set_xlabel("n_envs", fontsize=8)
        bottom.tick_params(labelsize=7)
        bottom.grid(True, alpha=0.3)
        ticks = sorted(set(x))
        bottom.xaxis.set_major_locator(FixedLocator(ticks))
        bottom.xaxis.set_minor_locator(NullLocator())
        names = {max(r["n_envs"], 1): str(r["n_envs"]) for r in rows}
        bottom.set_xticklabels([names[t] for t in ticks])
        if len(ticks) == 1:
            bottom.set_xlim(ticks[0] / 2, ticks[0] * 2)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.savefig(out, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return len(items)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="+", help="JSON files written by the benchmarks' --json")
    parser.add_argument("-o", "--out", default="benchmarks.png", help="the PNG to write (default benchmarks.png)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--columns", type=int, default=4, help="panels per row (default 4)")
    parser.add_argument("--dpi", type=int, default=100)
    args = parser.parse_args(argv)
    try:
        tables = [load(p) for p in args.tables]
        n = plot(tables, args.out, title=args.title, columns=args.columns, dpi=args.dpi)
    except TableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{n} panel{'s' if n != 1 else ''} written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
