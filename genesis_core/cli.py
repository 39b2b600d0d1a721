"""The `genesis-core` command: `plugins`, `inspect FILE`, `demo`."""

from __future__ import annotations

import argparse
import datetime
import sys


def _cmd_plugins(args):
    from .plugins import registry
    from .plugins.manager import AUTOLOAD_ENV, installed_entry_points

    reg = registry()
    loaded = {info.name for info in reg.plugins}
    skipped = [ep for ep in installed_entry_points() if ep.name not in loaded]
    if not reg.plugins:
        print("no plugins loaded (entry-point group genesis_core.plugins)")
    else:
        print(f"{'plugin':<12}{'distribution':<20}{'version':<10}{'contributes'}")
    for info in reg.plugins:
        mine = sorted(f"{kind} {key if isinstance(key, str) else '+'.join(key)}"
                      for (kind, key), who in reg.origin.items() if who == info.name)
        print(f"{info.name:<12}{info.distribution or '-':<20}{info.version or '-':<10}{', '.join(mine) or '-'}")
    for ep in skipped:
        dist, version = (ep.dist.name, ep.dist.version) if ep.dist is not None else ("-", "-")
        print(f"{ep.name:<12}{dist:<20}{version:<10}installed, not loaded (${AUTOLOAD_ENV})")
    return 0


def _cmd_inspect(args):
    from . import checkpoint
    from .errors import CheckpointError

    try:
        payload = checkpoint.read(args.file, max_bytes=args.max_bytes)
    except CheckpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        stamp = datetime.datetime.fromtimestamp(payload["timestamp"], tz=datetime.timezone.utc).isoformat(
            timespec="seconds")
    except (OverflowError, OSError, ValueError):
        stamp = "not a date"
    scene = payload["scene"]
    print(f"file:           {args.file}")
    print(f"format:         {payload['format']} version {payload['format_version']} "
          f"(written by genesis-core {payload.get('engine_version', '?')})")
    print(f"step_index:     {payload['step_index']}")
    print(f"timestamp:      {payload['timestamp']:.3f} ({stamp})")
    check = payload.get("checksum")
    print(f"checksum:       {'sha256 ' + check['digest'] + ' (verified)' if check else 'none (format version 1)'}")
    print(f"n_envs:         {scene.get('n_envs')}    precision: {scene.get('precision')}")
    print(f"solvers:        {', '.join(scene.get('solvers', {})) or '-'}")
    print(f"{'key':<32}{'shape':<22}dtype")
    for key, arr in payload["arrays"].items():
        print(f"{key:<32}{str(tuple(arr.shape)):<22}{arr.dtype}")
    return 0


def _cmd_demo(args):
    from . import demo

    config = dict(demo.DEFAULTS)
    if args.n_envs is not None:
        config["n_envs"] = args.n_envs
    if args.steps is not None:
        config["steps_before_checkpoint"] = config["steps_after_checkpoint"] = args.steps
    return 0 if demo.run(config, checkpoint_path=args.checkpoint, video=args.video) else 1


def main(argv=None):
    from . import checkpoint

    parser = argparse.ArgumentParser(prog="genesis-core", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plugins", help="list the plugins found, with versions and what they contribute")
    p.set_defaults(func=_cmd_plugins)
    p = sub.add_parser("inspect", help="print a checkpoint's step index, timestamp, format and arrays")
    p.add_argument("file")
    p.add_argument("--max-bytes", type=int, default=None,
                   help=f"refuse a larger file (default {checkpoint.DEFAULT_MAX_BYTES})")
    p.set_defaults(func=_cmd_inspect)
    p = sub.add_parser("demo", help="build the demo scene, run it, checkpoint, restore, compare the continuation")
    p.add_argument("--n-envs", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="steps before and after the checkpoint")
    p.add_argument("--checkpoint", default=None, help="where to write the checkpoint (default: a temporary file)")
    p.add_argument("--video", default=None, help="record environment 0 of the steps before the checkpoint to this "
                   ".mp4 or .gif")
    p.set_defaults(func=_cmd_demo)
    args = parser.parse_args(argv)
    from .errors import GenesisError

    try:
        return args.func(args)
    except GenesisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
