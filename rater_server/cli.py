"""``python -m rater_server`` (also ``simulacra rater``): serve the importance rater of :mod:`simulacra.rating`
over HTTP with waitress.

With no language model configured the offline backend answers; with one (``--set llm.model=...`` or a config
file's ``llm`` section), the language-model rater with the offline one as its fallback
(:func:`simulacra.rating.backends.build_backend`, the same backend a run builds). When the environment variable
``SIMULACRA_RATER_TOKEN`` is set, every request but ``GET /health`` must send ``Authorization: Bearer <token>``.
Exit status: 0 served and stopped (or ``--check`` found the model fit), 1 ``--check`` found it weak, 2 bad
settings (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

PROG = "simulacra rater"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Serve the importance rater over HTTP (waitress). When the environment variable "
                               "SIMULACRA_RATER_TOKEN is set, every request but GET /health must send "
                               "'Authorization: Bearer <token>'.")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    p.add_argument("--host", default="127.0.0.1", help="address to bind [%(default)s]")
    p.add_argument("--port", type=int, default=5000, help="port [%(default)s]")
    p.add_argument("--threads", type=int, default=4, help="worker threads answering requests [%(default)s]")
    p.add_argument("--config", default=None, help="YAML config file (the llm, rater and embedding sections are used)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="e.g. --set llm.model=llama3.1:8b --set llm.base_url=http://127.0.0.1:11434/v1; with "
                        "no model configured (nor OPENAI_MODEL) the offline backend answers")
    p.add_argument("--check", action="store_true",
                   help="measure the configured model on rater.check_sample labelled memories (Spearman "
                        "against the labels, answers parsed), print the figures and exit: status 0 ok, 1 weak")
    return p


def serve(args: argparse.Namespace) -> int:
    """Build the backend from the settings and serve it until interrupted (or measure it with ``--check``).

    Raises:
        SimulacraError: bad settings (thread count, port, token, config) or no model to check.
    """
    import waitress

    from rater_server.app import check_token, create_app
    from simulacra.config import load_config
    from simulacra.embeddings import build_embedder
    from simulacra.errors import SimulacraError
    from simulacra.llm import build_model
    from simulacra.rater import TOKEN_ENV, token_from_env
    from simulacra.rating.backends import build_backend

    if args.threads < 1:
        raise SimulacraError(f"--threads must be at least 1, got {args.threads}")
    if not 0 <= args.port <= 65535:
        raise SimulacraError(f"--port must be 0..65535, got {args.port}")
    try:
        token = check_token(token_from_env())
    except ValueError as err:
        raise SimulacraError(f"{TOKEN_ENV}: {err}") from None
    config = load_config(args.config, args.overrides)
    llm = build_model(config.llm)
    if args.check and llm is None:
        raise SimulacraError("no model to check: set llm.model (or OPENAI_MODEL), e.g. --set llm.model=llama3.1:8b "
                             "--set llm.base_url=http://127.0.0.1:11434/v1")
    # embedded as a run embeds (embedding.exact): a restarted rater rates exactly as before
    backend = build_backend(config.rater, build_embedder(config.embedding), llm)
    if llm is not None:
        from simulacra.rating.quality import QualityCheck, describe, format_figures

        if args.check:  # with rater.check_sample = 0, the default sample
            r = config.rater
            backend.check = backend.check or QualityCheck(min_spearman=r.min_spearman, on_weak_model=r.on_weak_model)
            quality = backend.ensure_checked()
            print(format_figures(quality, backend.model))
            return 1 if quality.get("weak") or quality.get("error") else 0
        if backend.check is not None:
            print(f"{PROG}: measuring {backend.model} on {backend.check.sample} labelled memories ...",
                  file=sys.stderr)
            print(f"{PROG}: {describe(backend.ensure_checked())}", file=sys.stderr)
    print(f"{PROG}: backend {backend.name}, model {backend.model}", file=sys.stderr)
    app = create_app(backend, token=token)
    host = f"[{args.host}]" if ":" in args.host else args.host
    auth = f"token required ({TOKEN_ENV})" if token else f"no token required (set {TOKEN_ENV} to require one)"
    print(f"{PROG}: serving on http://{host}:{args.port}/rate (waitress, {args.threads} threads; {auth})",
          file=sys.stderr)
    if token is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"{PROG}: warning: {args.host} may be reachable from other machines and no token is "
              f"required; set {TOKEN_ENV}", file=sys.stderr)
    waitress.serve(app, host=args.host, port=args.port, threads=args.threads)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and :func:`serve` as a program (:func:`simulacra.cli.dispatch`); returns the exit status."""
    from simulacra.cli import dispatch

    return dispatch(serve, build_parser().parse_args(argv), PROG)
