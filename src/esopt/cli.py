"""`esopt ...`: the entry points that workflow rules and users call."""

from __future__ import annotations

import argparse
import logging
import sys


def _model_fetch(args) -> None:
    from esopt.models import describe, fetch_model

    out = fetch_model(args.name, args.out or _default(args.name), force=args.force)
    print(describe(out))


def _model_tiny(args) -> None:
    from esopt.models import describe, make_tiny_model

    out = make_tiny_model(args.out, args.tokenizer_from, hidden_size=args.hidden_size,
                          num_layers=args.num_layers, seed=args.seed)
    print(describe(out))


def _default(name: str):
    from esopt.models import default_model_dir

    return default_model_dir(name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="esopt", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    model = sub.add_parser("model", help="base models").add_subparsers(dest="action",
                                                                        required=True)
    fetch = model.add_parser("fetch", help="download + convert an embedded model")
    fetch.add_argument("name", help="e.g. smollm2-135m-instruct")
    fetch.add_argument("--out", help="checkpoint directory (default resources/models/NAME)")
    fetch.add_argument("--force", action="store_true", help="redo even if verified")
    fetch.set_defaults(func=_model_fetch)

    tiny = model.add_parser("tiny", help="write a randomly initialised small Llama")
    tiny.add_argument("--out", required=True)
    tiny.add_argument("--tokenizer-from", required=True, help="a model directory")
    tiny.add_argument("--hidden-size", type=int, default=64)
    tiny.add_argument("--num-layers", type=int, default=2)
    tiny.add_argument("--seed", type=int, default=0)
    tiny.set_defaults(func=_model_tiny)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
