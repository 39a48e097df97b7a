"""Replay viewer: state from the trace alone, headless rendering, determinism, seeking, and the CLI."""

import os
import subprocess
import sys

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pytest  # noqa: E402

pygame = pytest.importorskip("pygame")

from simulacra.viewer.app import Player, save_screenshot  # noqa: E402
from simulacra.viewer.render import MARKER_RADIUS, Renderer, render_tick  # noqa: E402
from simulacra.viewer.state import ReplayState  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.test_simulation import memory_counts_from_trace, tiny_sim  # noqa: E402

TICKS = 8


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, rater_url, embedder):
    """A finished 8-tick run of the tiny world (Ann, Ben, Cal), closed: only its trace is used below."""
    db = tmp_path_factory.mktemp("viewer_db")
    with tiny_sim(db, rater_url, embedder, name="viewer") as sim:
        sim.run(TICKS)
        return sim.run_dir


@pytest.fixture(scope="module")
def replay(run_dir):
    return ReplayState.load(run_dir)


def talk_tick(replay):
    return next(t for t in range(TICKS) if replay.state_at(t).utterances)


def test_state_matches_the_trace(replay, run_dir):
    from simulacra.trace import read_trace

    _, ticks = read_trace(run_dir)
    assert len(replay) == TICKS and replay.agents == ["ann", "ben", "cal"]
    assert replay.initials["ann"] == "AA"  # Ann Archer
    for t, rec in enumerate(ticks):
        s = replay.state_at(t)
        assert s.clock == rec["clock"]
        assert {pid: a.place for pid, a in s.agents.items()} == rec["positions"]
        assert {pid: a.activity for pid, a in s.agents.items()} == {p: a["activity"] for p, a in rec["actions"].items()}
        # counts per tier: the add/move/forget operations up to this tick
        replayed = memory_counts_from_trace(ticks[: t + 1])
        for pid, a in s.agents.items():
            assert a.counts["short_term"] == len(replayed[pid]["short_term"])
            assert a.counts["long_term"] == len(replayed[pid]["long_term"])
            assert a.counts["static"] and a.counts["static"] > 5
            last = [op for op in rec["memory"] if op["op"] == "retrieve" and op["agent"] == pid][-1]
            assert a.last_retrieval.tick == t and a.last_retrieval.query == last["query"]
            assert [m.text for m in a.last_retrieval.results] == [m["text"] for m in last["results"]]
        lines = [ln["text"] for c in rec["conversations"] for ln in c["lines"]]
        assert [u.text for u in s.utterances] == lines
    assert any(replay.state_at(t).utterances for t in range(TICKS))


def test_screenshot_is_not_blank_and_markers_sit_on_their_places(replay):
    tick = talk_tick(replay)
    surface, r = render_tick(replay, tick, "ben")
    pixels = pygame.surfarray.array3d(surface)
    colours = {tuple(c) for c in pixels.reshape(-1, 3)[::7]}
    assert len(colours) > 20
    state = replay.state_at(tick)
    assert len(set(r.colours.values())) == len(replay.agents)
    for pid, a in state.agents.items():
        x, y = r.markers[pid]
        px, py = r.place_xy[a.place]
        # on its place, or on the ring around it when others share the place
        share = sum(1 for b in state.agents.values() if b.place == a.place)
        assert ((x - px) ** 2 + (y - py) ** 2) ** 0.5 <= Renderer.ring_radius(share) + 1
        # the marker's own colour fills its disc (the initials are in the middle: sample above them)
        assert tuple(surface.get_at((x, y - MARKER_RADIUS + 2)))[:3] == r.colours[pid]
        assert tuple(surface.get_at((x + 6, y - MARKER_RADIUS + 4)))[:3] == r.colours[pid]
    # conversation lines are in the bubbles
    assert r.bubble_lines and any(state.utterances[0].text[:15] in ln for ln in r.bubble_lines)


def test_panel_shows_action_counts_and_retrieval(replay):
    tick = talk_tick(replay)
    _, r = render_tick(replay, tick, "ann")
    a = replay.state_at(tick).agents["ann"]
    text = "\n".join(r.panel_lines)
    assert a.name in r.panel_lines and f"at {a.place_name}" in r.panel_lines
    assert a.activity.split()[0] in text
    assert f"short-term {a.counts['short_term']}" in text
    assert a.last_retrieval.results
    for m in a.last_retrieval.results[:3]:
        assert m.text.split()[0] in text and f"score {m.score:.3f}" in text
        assert f"rel {m.relevance:.2f}" in r.panel_lines
        if m.recency is not None:
            assert f"rec {m.recency:.2f}" in r.panel_lines and f"imp {m.importance:.2f}" in r.panel_lines


def test_rendering_is_deterministic_and_seeking_back_equals_playing_forward(replay, run_dir, tmp_path):
    a = save_screenshot(replay, 5, tmp_path / "a.png", "cal").read_bytes()
    b = save_screenshot(ReplayState.load(run_dir), 5, tmp_path / "b.png", "cal").read_bytes()
    assert a == b

    def frame(r, tick):
        s = pygame.Surface((1280, 800))
        r.draw(s, replay.state_at(tick), "ann")
        return pygame.image.tobytes(s, "RGB")

    renderer = Renderer(replay)
    forward = {}
    player = Player(replay)
    player.paused = False
    while True:  # play forwards in uneven steps, keeping the frame of each tick reached
        forward.setdefault(player.tick, (replay.state_at(player.tick), frame(renderer, player.tick)))
        if player.paused:
            break
        player.update(0.37)
    assert sorted(forward) == list(range(TICKS))
    for tick in (TICKS - 1, 4, 1, 0, 3):  # then seek backwards and around
        player.seek(tick)
        assert player.tick == tick and player.frac == 0.0
        assert replay.state_at(tick) == forward[tick][0]
        assert frame(renderer, tick) == forward[tick][1]


def test_player_controls(replay):
    p = Player(replay)
    assert p.selected == "ann" and not p.paused
    p.step(1)
    assert p.paused and p.tick == 1
    p.step(-5)
    assert p.tick == 0
    for d in "42":
        p.type_digit(d)
    p.confirm_seek()
    assert p.tick == TICKS - 1 and p.seek_text is None  # clamped to the last tick
    p.next_agent()
    assert p.selected == "ben"
    p.faster(1)
    assert p.speed == 2.0
    # interpolation: part way between two ticks, a walking agent's marker is between its two places
    p.seek(1)
    p.paused = False
    p.update(0.25)
    assert p.tick == 1 and p.frac == pytest.approx(0.5)
    r = Renderer(replay)
    s0, s1 = replay.state_at(1), replay.state_at(2)
    r.draw(pygame.Surface(r.size), s0, None, s1, p.frac)
    a, b = r.slots(s0)["ann"], r.slots(s1)["ann"]
    assert a != b  # Ann walks from the well to the shop
    x, y = r.markers["ann"]
    assert min(a[0], b[0]) - 1 <= x <= max(a[0], b[0]) + 1 and min(a[1], b[1]) - 1 <= y <= max(a[1], b[1]) + 1
    assert (x, y) != tuple(round(v) for v in a) and (x, y) != tuple(round(v) for v in b)


def test_cli_screenshot(run_dir, tmp_path):
    out = tmp_path / "shot.png"
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy"}
    proc = subprocess.run([sys.executable, "-m", "simulacra.cli", "replay", str(run_dir), "--tick", "3",
                           "--screenshot", str(out), "--agent", "ben"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pygame.image.load(str(out)).get_size() == (1280, 800)
    bad = subprocess.run([sys.executable, "-m", "simulacra.cli", "replay", str(run_dir), "--tick", "99",
                          "--screenshot", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "ticks 0..7" in bad.stderr


# ----------------------------------------------------------------- following a live run
def test_a_follower_reads_complete_lines_only_and_incremental_state_equals_loading_at_once(run_dir, tmp_path):
    from simulacra.viewer.state import TraceFollower

    lines = (run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)
    live = tmp_path / "trace.jsonl"
    live.write_bytes(b"".join(lines[:3]) + lines[3][:25])  # header, two ticks, half of the third
    follower = TraceFollower(live)
    first = follower.poll()
    assert follower.header is not None and len(first) == 2
    with live.open("ab") as fh:
        fh.write(lines[3][25:] + b"".join(lines[4:]))
    rest = follower.poll()
    assert len(rest) == len(lines) - 3 and follower.poll() == []
    grown = ReplayState(follower.header, first)
    grown.extend(rest)
    whole = ReplayState.load(run_dir)
    assert len(grown) == len(whole)
    assert all(grown.state_at(t) == whole.state_at(t) for t in range(whole.first_tick, whole.last_tick + 1))


def test_a_live_player_waits_at_the_last_tick_instead_of_pausing(replay):
    player = Player(replay, live=True)
    player.update(10_000)
    assert player.index == len(replay) - 1 and not player.paused
    player.live = False
    player.update(1)
    assert player.paused


def test_view_runs_a_simulation_and_follows_it_to_the_end(tmp_path, rater_url):
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy"}
    r = subprocess.run([sys.executable, "-m", "simulacra.cli", "view", "--world", str(ROOT / "tests/data/tiny.yaml"),
                        "--personas-dir", str(ROOT / "tests/data/personas"), "--ticks", "3", "--db-dir", str(tmp_path),
                        "--rater-url", rater_url, "--speed", "16", "--close-when-done"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "tiny-seed0" / "trace.jsonl").read_text().splitlines()) == 4  # header + 3 ticks


def test_held_spans_merge_a_topics_memories_and_say_why_the_last_one_went():
    """Ann's memories of the storm, op by op: a percept tagged with it (ticks 2-4, forgotten at 5 by consolidation),
    a line holding its text (4-6, forgotten at 7 by decay), the night's summary quoting it (9 on); one untagged
    memory without the text does not count, nor Ben's memory of something else. Held: ticks 2-6 and 9 on."""
    from simulacra import trace
    from simulacra.viewer.memory import HeldSpan, MemoryIndex

    storm = "A storm is coming down the hills tonight."

    def add(i, text, topic=None):
        return trace.add_op("ann", trace.SHORT_TERM, f"m{i}", text, "observation", 5, 10.0 * i, topic=topic)

    def forget(i, reason):
        return trace.forget_op("ann", f"m{i}", trace.SHORT_TERM, "x", 0.1, reason)

    ops = {2: [add(1, "Ann sees the rider shouting.", topic=storm)],
           4: [add(2, f'Ben said to Ann: "{storm}"'), add(3, "Ann waters the roses.")],
           5: [forget(1, "consolidation: importance <= 0.5")],
           7: [forget(2, "decayed importance < 0.1")],
           9: [add(4, f"Ann's day: saw: {storm}"),
               {**add(5, "Ben mends a net."), "agent": "ben"}]}
    ticks = [{"tick": t, "time": 600 + 10 * t, "memory": ops.get(t, []), "conversations": []} for t in range(12)]
    index = MemoryIndex({"agents": ["ann", "ben"]}, ticks)
    assert index.held_spans(storm) == {"ann": [HeldSpan(2, 7, "decayed importance < 0.1"), HeldSpan(9, None, "")]}
    assert [sorted(index.held_at(storm, t)) for t in (1, 2, 6, 7, 8, 9, 11)] == [
        [], ["ann"], ["ann"], [], [], ["ann"], ["ann"]]
    assert index.forgot_by(storm, 8) == {"ann": HeldSpan(2, 7, "decayed importance < 0.1")}
    assert index.forgot_by(storm, 11) == {} and index.forgot_by(storm, 1) == {}
    assert index.held_spans("A seal pup on the slipway.") == {}
    # a live viewer asks at every new tick: what it is told equals a fresh read of the ticks so far
    for split in range(12):
        live = MemoryIndex({"agents": ["ann", "ben"]}, ticks[:split])
        for t in range(split, 12):
            live.held_spans(storm)
            live.extend([ticks[t]])
            assert live.held_spans(storm) == MemoryIndex({"agents": ["ann", "ben"]}, ticks[:t + 1]).held_spans(storm)


def test_a_follower_checks_lines_as_every_reader_does(run_dir, tmp_path):
    """A line repeated in a live trace is the trace readers' error (naming the line), and a text holding U+2028
    (a line separator to ``str.splitlines``, not to JSON Lines) is read whole."""
    from simulacra.trace import TraceFormatError
    from simulacra.viewer.state import TraceFollower

    lines = (run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)
    odd = lines[1].replace(b'"tick":', '"note":"a\u2028b","tick":'.encode(), 1)
    live = tmp_path / "trace.jsonl"
    live.write_bytes(lines[0] + odd + lines[2])
    follower = TraceFollower(live)
    assert [r["tick"] for r in follower.poll()] == [0, 1] and follower.header is not None
    with live.open("ab") as fh:
        fh.write(lines[2])
    with pytest.raises(TraceFormatError, match=r"line 4: tick 1 follows tick 1"):
        follower.poll()


@pytest.mark.parametrize("size", ["5x5", "100000x100000", "1280x", "big"])
def test_a_window_size_out_of_range_is_refused_by_view_and_replay_alike(size, tmp_path, capsys):
    """``view --size 5x5`` ended in pygame's "Invalid resolution for Surface" and ``replay --size 100000x100000`` in
    its "Out of memory" (audit of stop 51): one check, :func:`simulacra.viewer.app.parse_size`, for both."""
    from simulacra.cli import main
    from simulacra.viewer.app import MAX_SIZE, MIN_SIZE, parse_size

    assert parse_size("1280x800") == (1280, 800)
    assert parse_size(f"{MIN_SIZE[0]}x{MIN_SIZE[1]}") == MIN_SIZE and parse_size("7680X4320") == MAX_SIZE
    for cmd in (["view", "--size", size, "--db-dir", str(tmp_path)], ["replay", str(tmp_path), "--size", size]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("--size must look like 1280x800" in err or "size must be (width, height) "
                                           "from 800x500 to 7680x4320 pixels" in err), err
    assert not any(tmp_path.iterdir())  # no run was started
