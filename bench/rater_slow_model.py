"""How long the rater takes to rate one batch behind a slow model that cuts long answers (issue 13).

``python -m bench.rater_slow_model [--latency 2] [--item-tokens 80] [--client-timeout 30]``

A scripted OpenAI-compatible server on 127.0.0.1 (``tests/openai_double.py``, :class:`RatingModel`) answers
every call after ``--latency`` seconds; a batch answer holds as many items as fit in the call's
``max_tokens`` at ``--item-tokens`` tokens each, and is cut there (``finish_reason: length``) like a small
local model's. A rater with the LLM backend, served over HTTP on a thread (``rater_server.ThreadedServer``), is
asked by a run's client (``connect_rater``, which reads the rater's limits) to rate 16 fresh memories in one
request. Prints seconds, model calls and outcome as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds before each model answer")
    parser.add_argument("--item-tokens", type=int, default=80, help="tokens one rated item costs the model")
    parser.add_argument("--client-timeout", type=float, default=30.0, help="rater.timeout_s of the run's client")
    parser.add_argument("--memories", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from rater_server import ThreadedServer, create_app
    from simulacra.embeddings import build_embedder
    from simulacra.errors import RaterError
    from simulacra.llm import OpenAIChatModel, RetryingModel, UsageMeter
    from simulacra.rater import connect_rater
    from simulacra.rating.backends import EmbeddingRater
    from simulacra.rating.llm import LLMRater
    from tests.openai_double import OpenAIDouble, RatingModel

    embedder = build_embedder()
    fallback = EmbeddingRater(embedder)
    fallback.rate(["warm up the embedder"])
    double = RatingModel(lambda text, position: 1 + sum(map(ord, text)) % 10,
                         fits=lambda n, max_tokens: max(0, (max_tokens - 60) // args.item_tokens),
                         latency_s=args.latency)
    memories = [f"Villager {i} notices that the {thing} by the mill is {state} this morning."
                for i, (thing, state) in enumerate(zip(["cart", "gate", "wheel", "fence"] * 8,
                                                       ["broken", "open", "stuck", "gone", "new"] * 8))][:args.memories]
    with OpenAIDouble() as server:
        server.script([], then=double)
        llm = UsageMeter(RetryingModel(OpenAIChatModel("double-model", base_url=server.url, timeout_s=30.0),
                                       attempts=4))
        rater = ThreadedServer(create_app(LLMRater(llm, fallback, batch_size=16)))
        client = connect_rater(rater.url, args.client_timeout, False, embedder)
        start = time.perf_counter()
        try:
            client.rate_many(memories)
            outcome = "rated"
        except RaterError as err:
            outcome = f"RaterError: {err}"
        seconds = time.perf_counter() - start
        client.close()
        rater.close()
        print(json.dumps({"memories": len(memories), "latency_s": args.latency, "item_tokens": args.item_tokens,
                          "client_timeout_s": args.client_timeout, "seconds": round(seconds, 1),
                          "model_requests": len(server.requests), "rated_twice_or_more":
                          sum(1 for n in double.rated.values() if n > 1), "outcome": outcome[:300]}))


if __name__ == "__main__":
    main()
