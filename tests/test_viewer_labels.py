"""The viewer on an imported town's crowded map (issue 26: an imported Smallville must be readable): the places
residents go to are named before the places they only pass through (an imported town's streets), and a name that
has no room below its place goes above it; a plan step whose activity names its place does not name it twice."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pytest  # noqa: E402

pygame = pytest.importorskip("pygame")

from simulacra.viewer.layout import label_order  # noqa: E402
from simulacra.viewer.render import CANVAS_MARGIN, render_tick  # noqa: E402
from simulacra.viewer.state import ReplayState  # noqa: E402


def test_label_order_puts_destinations_first_then_public_places_and_homes_last():
    places = {"street_a": {"kind": "public"}, "house": {"kind": "home"}, "cafe": {"kind": "shop"},
              "square": {"kind": "public"}, "street_b": {"kind": "public"}, "park": {"kind": "nature"}}
    assert label_order(places, {"house", "cafe", "square", "park"}) == ["square", "cafe", "park", "house",
                                                                        "street_a", "street_b"]
    # no destinations known (a header without personas): by kind alone, as before
    assert label_order(places) == ["street_a", "square", "street_b", "cafe", "park", "house"]


def replay(places, personas):
    """A two-tick replay of a town of ``places`` ({id: (kind, x, y)}) whose residents stay at home."""
    world = {"name": "Testville", "places": {pid: {"name": f"{pid.replace('_', ' ').title()} of Testville",
                                                   "kind": kind, "position": [x, y]}
                                             for pid, (kind, x, y) in places.items()},
             "paths": [[a, b] for a, b in zip(places, list(places)[1:])]}
    header = {"type": "header", "agents": list(personas), "world": world, "tick_minutes": 10,
              "personas": {a: {"name": a.title(), "age": 40, "occupation": "potter", "traits": ["calm"],
                               "background": f"{a.title()} lives in Testville.", "home": home,
                               "routine": [{"start": "07:00", "activity": "at home", "place": home}]}
                           for a, home in personas.items()}}
    ticks = [{"type": "tick", "tick": t, "time": 420 + 10 * t, "clock": "07:00", "positions": dict(personas),
              "actions": {}, "conversations": [], "memory": [], "events": [], "object_changes": {}, "plans": {},
              "decisions": [], "asleep": []} for t in range(2)]
    return ReplayState(header, ticks)


def test_a_street_gives_way_to_a_home_and_a_crowded_name_goes_above_its_place():
    # two homes and a street stacked closely on one column: only two names fit below; the street is not a
    # destination, so the homes are named, the second one above its place
    places = {"street": ("public", 50, 50), "home_a": ("home", 50, 52), "home_b": ("home", 50, 54),
              "far": ("home", 0, 0), "far2": ("home", 100, 100)}
    state = replay(places, {"ann": "home_a", "bob": "home_b", "cy": "far", "di": "far2"})
    assert state.destinations == {"home_a", "home_b", "far", "far2"}
    surface, renderer = render_tick(state, 1)
    assert renderer.labelled[:4] == ["home_a", "home_b", "far", "far2"]  # the street, if named, comes last
    names = dict(zip(renderer.labelled, renderer._canvas_labels))  # on the canvas, CANVAS_MARGIN past the map
    top = renderer.map_rect.y - CANVAS_MARGIN
    y = renderer.place_xy
    assert names["home_a"].top + top > y["home_a"][1]  # below its place
    assert names["home_b"].bottom + top < y["home_b"][1]  # no room below (home_a's name): above


def test_a_plan_step_naming_its_place_does_not_name_it_twice():
    state = replay({"cafe": ("shop", 0, 0), "home": ("home", 100, 100)}, {"ann": "home"})
    plan = {"type": "tick", "tick": 2, "time": 440, "clock": "07:20", "positions": {"ann": "home"}, "actions": {},
            "conversations": [], "memory": [], "events": [], "object_changes": {}, "plans": {}, "asleep": [],
            "decisions": [{"agent": "ann", "kind": "plan_day", "source": "scripted", "memory_ids": [], "value": [
                {"start": 420, "activity": "waking up", "place": "home"},
                {"start": 480, "activity": "working at Cafe of Testville", "place": "cafe"},
                {"start": 720, "activity": "having lunch at the cafe of testville", "place": "cafe"}]}]}
    state.extend([plan])
    assert state.state_at(2).agents["ann"].plan == ("07:00 waking up at Home of Testville",
                                                    "08:00 working at Cafe of Testville",
                                                    "12:00 having lunch at the cafe of testville")
