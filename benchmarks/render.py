"""Camera speed: the Franka panda (MJCF scene.xml, the arm on its floor) seen by one camera, RGB + depth per render.

Two rows: 64 environments at 128 x 128 (renders/s and env-frames/s = images per render x renders/s) and 1
environment at 640 x 480. The scene is built and rendered, never stepped (the render reads the built poses;
stepping would only add the rigid solver's compile time). With GENESIS_WORLD_PYTHON set
(GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv)), the same command runs Genesis World 1.4.5's camera (its
rasterizer, headless, VisOptions(split_envs=True) so that it returns one image per environment as ours does) on
the same scene in that venv and prints its figures and the ratios beside ours, or the one-line reason its
rendering failed here; without it, it says the anchor was skipped.

    python benchmarks/render.py [--frames 20] [--warmup 2] [--rows 64x128x128 1x640x480] [--json render.json]
"""

import argparse
import json
import os
import subprocess
import sys

from common import add_json_option, measuring, write_json

SCENE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "assets", "mjcf",
                     "franka_emika_panda", "scene.xml")
# (n_envs, width, height): the rows of the table
ROWS = [(64, 128, 128), (1, 640, 480)]
CAMERA = dict(pos=(1.8, 1.4, 1.2), lookat=(0.0, 0.0, 0.45), up=(0.0, 0.0, 1.0), fov=40)

# one row, run by either engine's python: prints RESULT {json} or FAILED <one line>
ROW = r"""
import json, sys, time
engine, path, n_envs, w, h, warmup, frames = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
camera = json.loads(sys.argv[8])
try:
    if engine == "ours":
        import genesis_core as gs
        gs.init(backend=gs.cpu, precision="32", logging_level="warning")
        scene = gs.Scene()
    else:
        import genesis as gs
        gs.init(backend=gs.cpu, precision="32", logging_level="error")
        # split_envs: one image per environment, stacked (by default its camera draws one image of all the
        # environments side by side)
        scene = gs.Scene(show_viewer=False, vis_options=gs.options.VisOptions(split_envs=n_envs > 1))
    scene.add_entity(gs.morphs.MJCF(file=path))
    cam = scene.add_camera(res=(w, h), GUI=False, **camera)
    scene.build(n_envs=n_envs) if n_envs > 1 else scene.build()
    t0 = time.perf_counter()
    for _ in range(warmup):
        cam.render(rgb=True, depth=True)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(frames):
        rgb, depth, _, _ = cam.render(rgb=True, depth=True)
    seconds = time.perf_counter() - t0
except Exception as e:  # the anchor may not render headless here: its reason, on one line
    print("FAILED " + (type(e).__name__ + ": " + str(e)).replace("\n", " ")[:300], flush=True)
    sys.exit(0)
shape = list(getattr(rgb, "shape", ()))
print("RESULT " + json.dumps({"warmup_s": first, "frames_per_s": frames / seconds, "shape": shape,
                              "images": shape[0] if len(shape) == 4 else 1}), flush=True)
"""


def run_row(python, engine, n_envs, w, h, warmup, frames):
    """One row in a fresh process: a dict (frames_per_s, warmup_s, shape), or a string saying why there is none."""
    cmd = [python, "-c", ROW, engine, SCENE, str(n_envs), str(w), str(h), str(warmup), str(frames), json.dumps(CAMERA)]
    try:
        with measuring(f"{engine} at n_envs {n_envs}, {w} x {h}"):
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return "timed out after 1800 s"
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
        if line.startswith("FAILED "):
            return line[len("FAILED "):]
    tail = (res.stderr.strip() or res.stdout.strip()).splitlines()
    return f"exit {res.returncode}: {tail[-1] if tail else 'no output'}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=20, help="timed renders per row")
    parser.add_argument("--warmup", type=int, default=2, help="untimed renders first (the first compiles)")
    parser.add_argument("--rows", nargs="+", default=[f"{n}x{w}x{h}" for n, w, h in ROWS],
                        help="rows as N_ENVSxWIDTHxHEIGHT (1 environment: the scene built unbatched)")
    parser.add_argument("--no-anchor", action="store_true",
                        help="skip Genesis World even if GENESIS_WORLD_PYTHON is set")
    add_json_option(parser)
    args = parser.parse_args()
    if args.frames < 1 or args.warmup < 1:
        parser.error("--frames and --warmup: at least 1 (the first render compiles the kernel)")
    try:
        rows = [tuple(int(x) for x in r.lower().split("x")) for r in args.rows]
    except ValueError:
        rows = [()]
    if any(len(r) != 3 or min(r) < 1 for r in rows):
        parser.error(f"--rows: N_ENVSxWIDTHxHEIGHT, three positive ints each (got {args.rows})")
    if not os.path.exists(SCENE):
        print(f"render benchmark skipped: the panda scene {os.path.normpath(SCENE)} is absent (it comes with "
              "../shared/assets).")
        return
    anchor = None if args.no_anchor else os.environ.get("GENESIS_WORLD_PYTHON")
    print(f"panda scene.xml, one camera, RGB + depth per render; ratio: env-frames/s, ours / Genesis World's; "
          f"{args.warmup} warm-up + {args.frames} timed renders per row, each row in a fresh process", flush=True)
    header = f"{'n_envs':>6}  {'res':>9}  {'ours renders/s':>14}  {'ours env-frames/s':>17}  {'first render, s':>15}"
    if anchor:
        header += f"  {'Genesis renders/s':>17}  {'Genesis env-frames/s':>20}  {'ratio':>6}"
    print(header, flush=True)
    figures = []
    for n_envs, w, h in rows:
        figure = {"scene": f"{w} x {h}", "n_envs": n_envs, "ours": None, "anchor": None}
        figures.append(figure)
        ours = run_row(sys.executable, "ours", n_envs, w, h, args.warmup, args.frames)
        if isinstance(ours, str):
            line = f"{n_envs:>6}  {w:>4}x{h:<4}  ours failed: {ours}"
        else:
            fps = ours["frames_per_s"]
            line = (f"{n_envs:>6}  {w:>4}x{h:<4}  {fps:>14.2f}  {fps * ours['images']:>17.1f}  "
                    f"{ours['warmup_s']:>15.2f}")
            figure["ours"] = fps * ours["images"]
        if anchor:
            theirs = run_row(anchor, "genesis", n_envs, w, h, args.warmup, args.frames)
            if isinstance(theirs, str):
                line += f"  Genesis World could not render: {theirs}"
            elif not isinstance(ours, str):  # the ratio of env-frames/s, ours over Genesis World's
                env_fps = theirs["frames_per_s"] * theirs["images"]
                figure["anchor"] = env_fps
                line += (f"  {theirs['frames_per_s']:>17.2f}  {env_fps:>20.1f}  "
                         f"{fps * ours['images'] / env_fps:>6.2f}")
        print(line, flush=True)
    if not anchor:
        print("anchor skipped: set GENESIS_WORLD_PYTHON=$(../shared/anchors/make-venv) to run Genesis World's camera "
              "on the same scene")
    write_json(args.json, "render", "panda scene.xml, RGB + depth per render", "env-frames/s", figures)


if __name__ == "__main__":
    main()
