"""examples/quickstart.ipynb runs, offline, in a real Jupyter kernel (nbclient), so the tutorial cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason="the dev extra installs nbclient (make test)")
nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "quickstart.ipynb"


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append(o.text)
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
    return "\n".join(out)


def test_the_quickstart_notebook_runs_in_a_kernel(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # a fresh kernel in an empty folder: the packaged town is found without the checkout's folders
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.output_type == "error" for o in c.get("outputs", [])) for c in code)
    summary = json.loads((tmp_path / "database" / "quickstart" / "summary.json").read_text(encoding="utf-8"))
    assert summary["ticks"] == 18 and summary["game_time"] == "day 1 (Monday) 10:00"
    ran = _text(code[1])
    assert "day 1 (Monday) 10:00 - 18 ticks" in ran
    for event in summary["events"]:  # the notebook prints what the summary says
        assert (f"{event['time']} {event['text'][:70]}... known by {len(event['known_by'])}, "
                f"remembered by {len(event['remembered_by'])}") in ran
    interview = _text(code[2])
    assert "mill" in interview.lower()  # the interview recalls the mill wheel's breaking
    assert "positions: 108 rows" in _text(code[3])  # 6 agents x 18 ticks
    assert any("image/png" in o.get("data", {}) for o in code[6].get("outputs", []))  # the diffusion plot
    assert any("image/png" in o.get("data", {}) for o in code[8].get("outputs", []))  # the replay frame
    assert (tmp_path / "replay.png").stat().st_size > 10_000
    assert "retrievals would have returned other memories" in _text(code[9])
    assert sorted(p.name for p in (tmp_path / "quickstart-frames").iterdir()) == [
        f"{t}.parquet" for t in sorted(("positions", "lines", "memory_ops", "retrievals", "decisions", "model_calls",
                                        "diffusion"))]
