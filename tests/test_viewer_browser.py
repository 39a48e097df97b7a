"""The viewer of issue 25 on a real run's trace: the memory browser, who knows what, relationships, the timeline,
the camera, crowds and hit-testing (pure, no window), then input as real pygame events posted to a headless window
and rendered frames saved as PNGs and checked for what they must show."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pytest  # noqa: E402

pygame = pytest.importorskip("pygame")

from simulacra.news import known_news  # noqa: E402
from simulacra.trace import read_trace  # noqa: E402
from simulacra.viewer.app import Player, handle_event, save_screenshot  # noqa: E402
from simulacra.viewer.layout import (  # noqa: E402
    GROUP_OVER,
    MARKER_RADIUS,
    Camera,
    Timeline,
    View,
    capacity,
    hit_test,
    nearest_distances,
    place_agents,
    ring_radius,
)
from simulacra.viewer.render import HELP_LINES, KNOW_COLOURS, Renderer, faded  # noqa: E402
from simulacra.viewer.state import ReplayState  # noqa: E402
from tests.conftest import ROOT, TELL_ALL  # noqa: E402

PARTY = ROOT / "scenarios" / "fernhollow-party-tiny.yaml"
TOPIC = "Greta Lund is throwing a cider-tasting party"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, rater_url, embedder):
    """The party scenario at its smallest (3 residents, 07:00 to 10:00, a party at 09:00), reflecting early so the
    trace has a reflection; a finished run: only its trace is read below."""
    from simulacra.config import load_config
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.evaluation.setup import run_scenario
    from simulacra.evaluation.variants import variant

    db = tmp_path_factory.mktemp("viewer_browser")
    config = load_config(None, [f"rater.url={rater_url}", "simulation.seed=0", "reflection.threshold=40", TELL_ALL])
    run_scenario(load_scenario(PARTY), config, variant("full"), db, "party", embedder)
    return db / "party"


@pytest.fixture(scope="module")
def trace(run_dir):
    return read_trace(run_dir)


@pytest.fixture(scope="module")
def replay(run_dir):
    return ReplayState.load(run_dir)


def party_topic(replay):
    return next(n.topic for n in replay.news_list() if n.topic.startswith(TOPIC))


# ----------------------------------------------------------------- the memory browser's model
def held_by_hand(header, ticks, agent, tick):
    """short_term / long_term ids ``agent`` holds at the end of ``tick``, replayed here op by op (after the
    scenario's seeded memories)."""
    tiers = {"short_term": set(), "long_term": set()}
    for t in [{"memory": header.get("scenario", {}).get("seeded", [])}, *ticks[: tick + 1]]:
        for op in t["memory"]:
            if op.get("agent") != agent:
                continue
            if op["op"] == "add":
                tiers[op["tier"]].add(op["id"])
            elif op["op"] == "move":
                tiers[op["from"]].discard(op["id"])
                tiers[op["to"]].add(op["id"])
            elif op["op"] == "forget":
                tiers[op["tier"]].discard(op["id"])
            elif op["op"] == "reinforce":
                tiers["short_term"].difference_update(op["from_ids"])
                tiers["long_term"].difference_update(op["replaces"])
                tiers["long_term"].add(op["id"])
    return tiers


def test_the_trace_has_what_the_browser_is_tested_on(trace):
    _, ticks = trace
    ops = {op["op"] for t in ticks for op in t["memory"]}
    assert {"add", "move", "forget", "rehearse", "retrieve", "reflect"} <= ops


def test_rows_are_the_memories_held_at_the_tick_tier_by_tier_newest_first(replay, trace):
    header, ticks = trace
    for agent in replay.agents:
        for tick in (0, len(ticks) // 2, len(ticks) - 1):
            state = replay.state_at(tick)
            rows = replay.memory.rows(agent, tick, state.time)
            by_tier = {}
            for r in rows:
                by_tier.setdefault(r.tier, []).append(r)
            hand = held_by_hand(header, ticks, agent, tick)
            assert {r.id for r in by_tier.get("short_term", [])} == hand["short_term"]
            assert {r.id for r in by_tier.get("long_term", [])} == hand["long_term"]
            assert len(by_tier["static"]) == state.agents[agent].counts["static"] > 5
            assert len(by_tier.get("short_term", [])) == state.agents[agent].counts["short_term"]
            posts = {op["id"] for t in ticks[: tick + 1] for op in t["memory"] if op["op"] == "post"}
            assert {r.id for r in by_tier.get("shared", [])} == posts
            # tier by tier in the browser's order, newest first within a tier, ages from the tick's start
            order = [r.tier for r in rows]
            assert order == sorted(order, key=["static", "short_term", "long_term", "shared"].index)
            for tier in ("short_term", "long_term", "shared"):
                stamps = [r.timestamp for r in by_tier.get(tier, [])]
                assert stamps == sorted(stamps, reverse=True)
                assert all(r.age_minutes == state.time - r.timestamp for r in by_tier.get(tier, []))
    # the run's added memories carry the rating and kind of their add operation
    adds = {op["id"]: op for t in ticks for op in t["memory"] if op["op"] == "add"}
    last = replay.memory.rows("greta_lund", len(ticks) - 1, replay.state_at(len(ticks) - 1).time)
    for r in last:
        if r.id in adds and r.tier == "short_term":
            assert (r.rating, r.kind, r.text) == (adds[r.id]["rating"], adds[r.id]["kind"], adds[r.id]["text"])


def test_a_memory_is_absent_before_it_is_written_and_after_it_is_forgotten(replay, trace):
    _, ticks = trace
    forgets = [(t["tick"], op) for t in ticks for op in t["memory"] if op["op"] == "forget"]
    assert forgets
    tick, op = forgets[0]
    written = next(t["tick"] for t in ticks for o in t["memory"] if o["op"] == "add" and o["id"] == op["id"])
    ids = lambda t: {r.id for r in replay.memory.rows(op["agent"], t, replay.state_at(t).time)}  # noqa: E731
    assert op["id"] in ids(tick - 1) and op["id"] not in ids(tick)
    if written > 0:
        assert op["id"] not in ids(written - 1)


def test_filters_by_tier_kind_and_search(replay):
    tick = replay.last_tick
    now = replay.state_at(tick).time
    every = replay.memory.rows("greta_lund", tick, now)
    st = replay.memory.rows("greta_lund", tick, now, tiers={"short_term"})
    assert st == [r for r in every if r.tier == "short_term"] and st
    kinds = replay.memory.kinds("greta_lund")
    assert {"persona", "observation"} <= set(kinds)
    obs = replay.memory.rows("greta_lund", tick, now, kinds={"observation", "dialogue"})
    assert obs == [r for r in every if r.kind in ("observation", "dialogue")] and obs
    found = replay.memory.rows("greta_lund", tick, now, search="PaRtY")
    assert found and found == [r for r in every if "party" in r.text.lower()]
    assert replay.memory.rows("greta_lund", tick, now, search="zzz no such text") == []


def test_a_memory_shows_the_retrievals_that_returned_it_with_their_score_terms(replay, trace):
    _, ticks = trace
    header = trace[0]
    a_rel = header["config"]["memory"]["a_rel"]
    returned = [(t["tick"], op, rank, m) for t in ticks for op in t["memory"] if op["op"] == "retrieve"
                for rank, m in enumerate(op["results"], 1) if m["tier"] == "short_term"]
    tick, op, rank, m = returned[len(returned) // 2]
    agent = op["agent"]
    d = replay.memory.detail(agent, m["id"], tick, replay.state_at(tick).time)
    assert d is not None
    got = [a for a in d.retrievals if a.tick == tick and a.query == op["query"]]
    assert got, "the retrieval of that tick is listed"
    a = got[0]
    assert (a.rank, a.recency, a.importance, a.relevance, a.score) == (rank, m["recency"], m["importance"],
                                                                      m["relevance"], m["score"])
    assert a.weights is not None and a.weights[2] == a_rel
    # every retrieval listed returned it, and none after the tick is shown
    by_hand = [(t["tick"], o["query"]) for t in ticks[: tick + 1] for o in t["memory"] if o["op"] == "retrieve"
               and o["agent"] == agent and any(x["id"] == m["id"] for x in o["results"])]
    assert [(x.tick, x.query) for x in d.retrievals] == by_hand
    row = next(r for r in replay.memory.rows(agent, tick, replay.state_at(tick).time) if r.id == m["id"])
    assert row.retrieved == len(by_hand)


def test_a_reflection_shows_its_evidence_and_last_access_follows_rehearsals(replay, trace):
    _, ticks = trace
    refl = [(t["tick"], op) for t in ticks for op in t["memory"] if op["op"] == "add" and op["kind"] == "reflection"]
    assert refl, "the run reflected"
    tick, op = refl[0]
    d = replay.memory.detail(op["agent"], op["id"], tick, replay.state_at(tick).time)
    assert [e for e, _ in d.evidence] == op["evidence_ids"] and d.evidence
    assert all(text != "?" for _, text in d.evidence)
    assert d.row.kind == "reflection" and d.depth == op.get("depth")
    rehearsed = [(t["tick"], o) for t in ticks for o in t["memory"] if o["op"] == "rehearse"]
    tick, op = rehearsed[0]
    mid = op["ids"][0]
    rows = {r.id: r for r in replay.memory.rows(op["agent"], tick, replay.state_at(tick).time)}
    if mid in rows:
        assert rows[mid].last_access == op["time"]
        earlier = {r.id: r for r in replay.memory.rows(op["agent"], tick - 1, replay.state_at(tick - 1).time)}
        if mid in earlier:
            assert earlier[mid].last_access != op["time"]


# ----------------------------------------------------------------- who knows what, relationships
def test_who_knows_the_party_follows_the_towns_rule_and_says_from_whom(replay, trace):
    header, ticks = trace
    topic = party_topic(replay)
    known = known_news(header, ticks)
    for tick in range(len(ticks)):
        assert sorted(replay.knowers_at(topic, tick)) == known.knowers(topic, tick)
    final = replay.knowers_at(topic, replay.last_tick)
    assert len(final) >= 2, "the party's news travelled"
    for agent, w in final.items():
        if w.how == "heard":  # the speaker of a line with the topic, heard by this agent at that tick
            lines = [ln for c in ticks[w.tick]["conversations"] for ln in c["lines"]
                     if ln["topic"] == topic and ln["listener"] == agent]
            assert w.source == lines[0]["speaker"]
    curve = replay.diffusion(topic)
    assert len(curve) == len(replay) and curve == sorted(curve) and curve[-1] == len(final)
    assert [n.topic for n in replay.news_list()].count(topic) == 1


def test_relationships_count_conversations_up_to_the_tick(replay, trace):
    _, ticks = trace
    for tick in (len(ticks) // 2, len(ticks) - 1):
        hand = {}
        for t in ticks[: tick + 1]:
            for c in t["conversations"]:
                a, b = sorted(c["participants"])
                hand[(a, b)] = hand.get((a, b), 0) + 1
        assert replay.talked(tick) == hand
    assert replay.talked(len(ticks) - 1)


def test_objects_of_a_place_take_their_changes(replay, trace):
    header, ticks = trace
    changes = [(t["tick"], o, s) for t in ticks for o, s in t["object_changes"].items()]
    objects = {o["id"]: o for o in header["world"]["objects"]}
    if changes:
        tick, oid, st = changes[0]
        place = objects[oid]["place"]
        assert (objects[oid]["name"], st) in replay.objects_at(place, tick)
    oid, obj = next(iter(objects.items()))
    assert (obj["name"], header["objects"][oid]) in replay.objects_at(obj["place"], -1)


# ----------------------------------------------------------------- geometry: timeline, camera, crowds, hits
def test_timeline_maps_ticks_to_pixels_and_back(replay):
    tl = Timeline(replay.first_tick, replay.last_tick, 12, 816)
    assert [tl.tick_at(tl.x_of(t)) for t in range(len(replay))] == list(range(len(replay)))
    assert tl.tick_at(-50) == replay.first_tick and tl.tick_at(5000) == replay.last_tick
    nine = replay.tick_of_clock("09:00")
    assert replay.state_at(nine).clock == "09:00"
    assert replay.tick_of_clock("23:30") is None


def test_camera_round_trips_and_zooms_about_the_mouse():
    cam = Camera((0, 40, 840, 700), [(0, 0), (100, 50), (40, 80)])
    for p in [(0, 0), (100, 50), (40, 80), (55.5, 12.25)]:
        q = cam.to_screen(p)
        assert 0 <= q[0] <= 840 and 40 <= q[1] <= 740
        back = cam.to_world(q)
        assert back == pytest.approx(p)
    mouse = (300.0, 200.0)
    under = cam.to_world(mouse)
    cam.zoom_at(mouse, 2.0)
    assert cam.zoom == 2.0 and cam.to_screen(under) == pytest.approx(mouse)
    a, b = cam.to_screen((0, 0)), cam.to_screen((100, 0))
    cam.move(10, -5)
    assert cam.to_screen((0, 0)) == pytest.approx((a[0] + 10, a[1] - 5))
    assert (b[0] - a[0]) == pytest.approx(2 * (Camera((0, 40, 840, 700), cam.points).to_screen((100, 0))[0]
                                               - Camera((0, 40, 840, 700), cam.points).to_screen((0, 0))[0]))


def test_crowds_group_past_the_threshold_expand_and_hit():
    at = {"square": [f"a{i}" for i in range(GROUP_OVER + 3)], "home": ["b0", "b1"]}
    xy = {"square": (200.0, 200.0), "home": (500.0, 300.0)}
    p = place_agents(at, xy)
    assert set(p.groups) == {"square"} and len(p.groups["square"].agents) == GROUP_OVER + 3
    assert set(p.markers) == {"b0", "b1"}
    opened = place_agents(at, xy, expanded={"square"})
    assert not opened.groups and set(opened.markers) == set(at["square"]) | {"b0", "b1"}
    pts = [opened.markers[a] for a in at["square"]]
    assert min((x1 - x2) ** 2 + (y1 - y2) ** 2 for i, (x1, y1) in enumerate(pts) for (x2, y2) in pts[i + 1:]) >= (
        2 * MARKER_RADIUS) ** 2  # no two markers overlap
    places = {"square": (183.0, 183.0, 34.0, 34.0), "home": (483.0, 283.0, 34.0, 34.0)}
    assert hit_test(p.markers["b0"], p.markers, p.groups, places).id == "b0"
    assert (hit_test((201, 199), p.markers, p.groups, places).kind, "square") == ("group", "square")
    assert hit_test((201, 199), opened.markers, opened.groups, places).kind in ("agent", "place")
    assert hit_test((10, 10), p.markers, p.groups, places) is None
    # zoomed out, places close together have room for fewer markers: their crowds are groups sooner
    assert capacity(10) == 1 and capacity(40) == 1 and capacity(1000) > capacity(200) > capacity(100) > 1
    for d in (60.0, 100.0, 200.0):
        n = capacity(d)
        assert ring_radius(n) + MARKER_RADIUS + 2 <= d / 2 < ring_radius(n + 1) + MARKER_RADIUS + 2
    tight = place_agents(at, xy, room={"home": 1})
    assert set(tight.groups) == {"square", "home"} and not tight.markers
    assert nearest_distances({"a": (0, 0), "b": (3, 4), "c": (100, 0)}) == {"a": 5.0, "b": 5.0,
                                                                          "c": (97 ** 2 + 4 ** 2) ** 0.5}


# ----------------------------------------------------------------- input: real events in a headless window
@pytest.fixture
def window(replay):
    pygame.display.init()
    pygame.font.init()
    screen = pygame.display.set_mode((1280, 800))
    renderer = Renderer(replay)
    player = Player(replay)
    player.paused = True

    def frame(events=()):
        for ev in events:
            pygame.event.post(ev)
        for ev in pygame.event.get():
            handle_event(ev, player, renderer, screen)
        state = replay.state_at(player.tick)
        renderer.draw(screen, state, player.selected, overlay=None, view=player.view)
        return screen

    pygame.event.get()  # drop what the window's opening queued
    frame()
    yield player, renderer, frame, screen
    pygame.display.quit()


def click(pos, button=1):
    return [pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=pos, button=button),
            pygame.event.Event(pygame.MOUSEBUTTONUP, pos=pos, button=button)]


def key(k, unicode="", mod=0):
    return pygame.event.Event(pygame.KEYDOWN, key=k, unicode=unicode, mod=mod)


def centre(rect):
    return (rect.x + rect.w // 2, rect.y + rect.h // 2)


def hotspot(renderer, action):
    return centre(next(r for r, a in renderer.hotspots if a == action))


def test_clicking_an_agent_selects_it_and_a_place_lists_who_is_there(window, replay):
    player, renderer, frame, _ = window
    player.seek(replay.tick_of_clock("09:00"))
    frame()
    other = next(a for a in replay.agents if a != player.selected and a in renderer.markers)
    frame(click(renderer.markers[other]))
    assert player.selected == other
    assert replay.names[other] in renderer.panel_lines
    state = replay.state_at(player.tick)
    place = state.agents[other].place
    x, y, w, h = renderer.place_rects[place]
    label_point = (int(x + w / 2), int(y + h - 3))  # the bottom of the label, below the markers
    assert renderer.hit(label_point).kind == "place"
    frame(click(label_point))
    assert player.view.panel == "place" and player.view.place == place
    here = [a for a in replay.agents if state.agents[a].place == place]
    for a in here:
        assert replay.names[a] in renderer.panel_lines
        assert any(state.agents[a].activity[:20] in ln for ln in renderer.panel_lines)
    assert any(ln.startswith("objects (") for ln in renderer.panel_lines)
    # a click on an agent in the place's list selects it
    frame(click(hotspot(renderer, ("agent", here[-1]))))
    assert player.selected == here[-1]


def test_memory_browser_by_keys_clicks_and_typing(window, replay, tmp_path):
    player, renderer, frame, screen = window
    player.seek(replay.last_tick)
    player.selected = "greta_lund"
    frame([key(pygame.K_m, "m")])
    assert player.view.panel == "memory"
    state = replay.state_at(player.tick)
    rows = replay.memory.rows("greta_lund", player.tick, state.time)
    assert rows[0].text[:30] in "\n".join(renderer.panel_lines)
    # the static chip hides the static tier
    frame(click(hotspot(renderer, ("tier", "static"))))
    assert "static" not in player.view.tiers
    shown = replay.memory.rows("greta_lund", player.tick, state.time, tiers=player.view.tiers)
    assert shown[0].tier == "short_term" and shown[0].text[:30] in "\n".join(renderer.panel_lines)
    # typing into the search box
    frame(click(hotspot(renderer, ("search",))))
    assert player.view.searching
    frame([key(getattr(pygame, f"K_{c}"), c) for c in "party"])
    assert player.view.search == "party"
    listed = [r for r in renderer.hotspots if r[1][0] == "memory"]
    assert listed
    texts = {r.id: r.text for r in rows}
    assert all("party" in texts[a[1]].lower() for _, a in listed)
    frame([key(pygame.K_RETURN)])
    assert not player.view.searching
    # selecting a memory shows the retrievals that returned it, with score terms
    chosen = next(a[1] for _, a in listed
                  if replay.memory.detail("greta_lund", a[1], player.tick, state.time).retrievals)
    frame(click(hotspot(renderer, ("memory", chosen))))
    assert player.view.memory == chosen
    d = replay.memory.detail("greta_lund", chosen, player.tick, state.time)
    assert f"returned by {len(d.retrievals)} retrievals:" in renderer.panel_lines
    last = d.retrievals[-1]
    assert f"rel {last.relevance:.2f}" in renderer.panel_lines
    # hovering a row shows the memory's whole text
    frame([pygame.event.Event(pygame.MOUSEMOTION, pos=hotspot(renderer, ("memory", chosen)), rel=(0, 0),
                              buttons=(0, 0, 0))])
    assert " ".join(renderer.tooltip) == " ".join(texts[chosen].split())
    # the frame as a PNG shows the browser: the selected row's highlight is drawn in the panel
    out = tmp_path / "browser.png"
    pygame.image.save(screen, str(out))
    img = pygame.image.load(str(out))
    rect = next(r for r, a in renderer.hotspots if a == ("memory", chosen))
    assert tuple(img.get_at((rect.x + 2, rect.y + rect.h // 2)))[:3] == (72, 84, 118)
    # the wheel over the panel scrolls the list (3 rows a notch), Page Down by 8, Page Up back
    frame(click(hotspot(renderer, ("search",))) + [key(pygame.K_BACKSPACE)] * 5 + [key(pygame.K_RETURN)])
    assert player.view.search == "" and len(shown) > 12
    top = renderer.hotspots[[a for _, a in renderer.hotspots].index(("memory", shown[0].id))][0].y
    frame([pygame.event.Event(pygame.MOUSEWHEEL, x=0, y=-1, pos=(1100, 500))])
    assert player.view.scroll["memory"] == 3
    first = next(a for _, a in renderer.hotspots if a[0] == "memory")
    assert first == ("memory", shown[3].id)
    assert next(r for r, a in renderer.hotspots if a == first).y == top
    frame([key(pygame.K_PAGEDOWN), key(pygame.K_PAGEUP), key(pygame.K_PAGEUP)])
    assert player.view.scroll["memory"] == 0


def test_who_knows_view_colours_agents_by_what_they_know(window, replay):
    player, renderer, frame, screen = window
    topic = party_topic(replay)
    player.seek(replay.last_tick)
    frame([key(pygame.K_n, "n")])
    assert player.view.panel == "news"
    frame(click(hotspot(renderer, ("news", topic))))
    assert player.view.news == topic
    knowing = replay.knowers_at(topic, player.tick)
    remembering = replay.remembering_at(topic, player.tick)
    assert (f"known by {len(knowing)} of {len(replay.agents)} at {replay.state_at(player.tick).clock}, still "
            f"remembered by {len(remembering)}") in renderer.panel_lines
    assert remembering and remembering <= set(knowing)
    for agent, (x, y) in renderer.markers.items():
        colour = KNOW_COLOURS[knowing[agent].how] if agent in knowing else KNOW_COLOURS[None]
        if agent in knowing and agent not in remembering:
            colour = faded(colour)
        assert tuple(screen.get_at((x, y - MARKER_RADIUS + 2)))[:3] == colour
    # earlier, fewer know it: the view follows the tick
    first = min(w.tick for w in knowing.values())
    player.seek(first - 1 if first > 0 else 0)
    frame()
    assert len(replay.knowers_at(topic, player.tick)) < len(knowing) or first == 0


def test_timeline_click_and_drag_seek(window, replay):
    player, renderer, frame, _ = window
    player.paused = False
    nine = replay.tick_of_clock("09:00")
    y = renderer.timeline_rect.y + 28
    frame(click((round(renderer.timeline.x_of(nine)), y)))
    assert player.tick == nine and player.paused
    start = round(renderer.timeline.x_of(2))
    end = round(renderer.timeline.x_of(replay.last_tick - 1))
    frame([pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=(start, y), button=1),
           pygame.event.Event(pygame.MOUSEMOTION, pos=(end, y), rel=(end - start, 0), buttons=(1, 0, 0))])
    assert player.tick == replay.last_tick - 1
    frame([pygame.event.Event(pygame.MOUSEBUTTONUP, pos=(end, y), button=1)])
    assert player.drag is None


def test_zoom_pan_hover_and_help(window, replay):
    player, renderer, frame, _ = window
    middle = renderer.map_rect.center
    frame([pygame.event.Event(pygame.MOUSEWHEEL, x=0, y=2, pos=middle)])
    assert renderer.camera.zoom == pytest.approx(1.25 ** 2)
    before = dict(renderer.place_xy)
    frame([pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=(100, 300), button=1),
           pygame.event.Event(pygame.MOUSEMOTION, pos=(160, 340), rel=(60, 40), buttons=(1, 0, 0)),
           pygame.event.Event(pygame.MOUSEBUTTONUP, pos=(160, 340), button=1)])
    moved = {p: (renderer.place_xy[p][0] - before[p][0], renderer.place_xy[p][1] - before[p][1]) for p in before}
    assert set(moved.values()) == {(60, 40)}
    assert player.view.panel == "agent"  # a drag is not a click
    frame([key(pygame.K_c, "c")])
    assert renderer.camera.zoom == 1.0
    frame()
    agent, pos = next(iter(renderer.markers.items()))
    frame([pygame.event.Event(pygame.MOUSEMOTION, pos=pos, rel=(0, 0), buttons=(0, 0, 0))])
    assert renderer.tooltip and renderer.tooltip[0] == replay.names[agent]
    frame([key(pygame.K_h, "h")])
    assert player.help
    keys = " ".join(k for k, _ in HELP_LINES)
    for k in ("space", "Tab", "M", "N", "R", "B", "E", "/", "[ / ]", "click agent", "click place", "timeline",
              "wheel", "drag the map", "hover"):
        assert k in keys


def test_relationships_overlay_and_bubbles_toggle(window, replay):
    player, renderer, frame, screen = window
    talk = next(t for t in range(len(replay)) if replay.state_at(t).utterances)
    player.seek(talk)
    frame()
    assert renderer.bubble_lines
    frame([key(pygame.K_b, "b")])
    assert not player.view.bubbles and renderer.bubble_lines == []
    frame([key(pygame.K_r, "r")])
    assert player.view.relations
    pair, n = next(iter(replay.talked(replay.last_tick).items()))
    player.seek(replay.last_tick)
    player.view.expanded = set(replay.places)
    with_lines = pygame.image.tobytes(frame(), "RGB")
    player.view.relations = False
    without = pygame.image.tobytes(frame(), "RGB")
    a, b = renderer.markers.get(pair[0]), renderer.markers.get(pair[1])
    if a is not None and b is not None and a != b:
        assert with_lines != without


def test_a_crowd_is_one_counted_group_until_clicked(replay):
    """Three residents never crowd a place past the default threshold; with a threshold of 1 any two at one place
    are a counted group, which a click expands into its agents and a second click folds."""
    pygame.display.init()
    pygame.font.init()
    screen = pygame.display.set_mode((1280, 800))
    r = Renderer(replay, group_over=1)
    player = Player(replay)
    player.paused = True
    tick = next(t for t in range(len(replay))
                if max(len(v) for v in r.agents_at(replay.state_at(t)).values()) >= 2)
    player.seek(tick)

    def frame(events=()):
        for ev in events:
            pygame.event.post(ev)
        for ev in pygame.event.get():
            handle_event(ev, player, r, screen)
        r.draw(screen, replay.state_at(player.tick), player.selected, view=player.view)

    pygame.event.get()
    frame()
    place, group = next(iter(r.groups.items()))
    assert len(group.agents) >= 2 and not set(group.agents) & set(r.markers)
    assert str(len(group.agents)) in "".join(str(len(g.agents)) for g in r.groups.values())
    frame(click(tuple(round(v) for v in group.centre)))
    assert place in player.view.expanded and place not in r.groups
    assert set(group.agents) <= set(r.markers)
    assert player.view.panel == "place" and player.view.place == place
    x, y, w, h = r.place_rects[place]
    frame(click((int(x + w / 2), int(y + h - 3))))  # its label: fold it again
    assert place not in player.view.expanded and place in r.groups
    pygame.display.quit()


def test_memory_browser_screenshot_from_the_cli_helper(replay, tmp_path):
    view = View(panel="memory", tiers={"short_term", "long_term", "shared"})
    out = save_screenshot(replay, replay.last_tick, tmp_path / "m.png", "greta_lund", view=view)
    img = pygame.image.load(str(out))
    assert img.get_size() == (1280, 800)
    panel = {tuple(img.get_at((x, y)))[:3] for x in range(850, 1270, 9) for y in range(200, 780, 9)}
    assert (50, 55, 68) in panel and len(panel) > 10  # row backgrounds and their text
