"""How well the offline reflector groups memories by topic: ``python -m simulacra.rating.evaluate_reflection``.

The labelled set ``data/reflection_scenes.jsonl`` holds scenes, each the memories one agent might reflect on:
``{"scene", "agent", "id", "text", "rating", "topic": str | null}``. The ``trace:<agent>`` scenes are the distinct
memories rated 3 or more that each agent of the Fernhollow run (seed 0) stored, topic-labelled by the world
event they are about (keyword rules, checked by hand); the ``hand:<agent>`` scenes are written for this
project and say the same things in varied words. ``topic`` is null for everyday memories about no event.

The score is pairwise, over the pairs of a scene with at least one labelled member (pairs of two
unlabelled memories are not judged: two plans of the same routine may rightly cluster): precision is the
share of pairs put in one cluster that share a topic, recall the share of same-topic pairs put in one
cluster. Scenes are averaged, each weighing the same.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simulacra.rating.reflection import OfflineReflector

SCENES_PATH = Path(__file__).parent / "data" / "reflection_scenes.jsonl"


def load_scenes(path: str | Path = SCENES_PATH) -> dict[str, list[dict]]:
    """Scenes by name, each a list of ``{"scene", "agent", "id", "text", "rating", "topic"}`` in file order."""
    scenes: dict[str, list[dict]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            scenes.setdefault(row["scene"], []).append(row)
    return scenes


def pair_scores(labels: np.ndarray, topics: Sequence[str | None]) -> tuple[float, float]:
    """Pairwise ``(precision, recall)`` of cluster ``labels`` against ``topics`` (``None`` = no topic).

    An empty denominator scores 1.0.
    """
    same_cluster = labels[:, None] == labels[None, :]
    t = np.array([x if x is not None else f"\0{i}" for i, x in enumerate(topics)], dtype=object)
    same_topic = t[:, None] == t[None, :]
    labelled = np.array([x is not None for x in topics])
    judged = np.triu(labelled[:, None] | labelled[None, :], k=1)
    tp = (same_cluster & same_topic & judged).sum()
    precision = tp / max(1, (same_cluster & judged).sum()) if (same_cluster & judged).any() else 1.0
    recall = tp / max(1, (same_topic & judged).sum()) if (same_topic & judged).any() else 1.0
    return float(precision), float(recall)


def evaluate(embedder, thresholds: Sequence[float] = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8),
             path: str | Path = SCENES_PATH) -> list[dict]:
    """Per threshold: ``{"threshold", "trace" | "hand" | "all": {"precision", "recall", "f1"}}``.

    Precision and recall are means over the scenes of that kind; F1 is their harmonic mean. The reflector is
    given each scene's agent, as the simulation gives it.
    """
    scenes = load_scenes(path)
    out = []
    for threshold in thresholds:
        reflector = OfflineReflector(embedder, threshold=threshold)
        row: dict = {"threshold": threshold}
        per_kind: dict[str, list[tuple[float, float]]] = {"trace": [], "hand": [], "all": []}
        for name, rows in scenes.items():
            labels = reflector.clusters([r["text"] for r in rows], rows[0]["agent"])
            scores = pair_scores(labels, [r["topic"] for r in rows])
            per_kind[name.split(":", 1)[0]].append(scores)
            per_kind["all"].append(scores)
        for kind, scores in per_kind.items():
            p, r = (float(np.mean(s)) for s in zip(*scores))
            row[kind] = {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}
        out.append(row)
    return out


def main() -> None:  # pragma: no cover - thin CLI
    argparse.ArgumentParser(description=__doc__).parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from simulacra.embeddings import build_embedder

    kinds = ("trace", "hand", "all")
    print("| threshold | " + " | ".join(f"{k} P / R / F1" for k in kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for row in evaluate(build_embedder()):
        cells = [f"{row[k]['precision']:.2f} / {row[k]['recall']:.2f} / {row[k]['f1']:.2f}" for k in kinds]
        print(f"| {row['threshold']:.2f} | " + " | ".join(cells) + " |")

if __name__ == "__main__":  # pragma: no cover
    main()
