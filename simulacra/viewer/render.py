"""Drawing a :class:`~simulacra.viewer.state.TickState` on a pygame Surface.

The :class:`Renderer` draws the map (places from the world's ``position`` [x, y] through the
:class:`~simulacra.viewer.layout.Camera`, paths, labels placed so they do not overlap), the agents as coloured
markers with initials (several at one place on a ring around it; a crowded place as one counted group that a click
expands), speech bubbles placed clear of the markers and the place names, the relationships overlay (who talked with
whom up to the tick, line width by the number of conversations), the who-knows-what colouring, the timeline along
the bottom (days, world events, conversations, the current tick), a tooltip, and a side panel with four views:
the selected agent (place, action, memory counts, day plan, last retrieval with score bars), its memory browser
(tier by tier, filters, search, a memory's retrievals and evidence), a place (who is there, doing what, its
objects' states) and the news (who knows the picked news at the tick, from whom, and its diffusion curve).

After :meth:`Renderer.draw` it exposes what it drew (``markers``, ``groups``, ``place_xy``, ``panel_lines``,
``bubble_lines``, ``hotspots``, ``timeline``) so tests and click handling need not read pixels. The map's layer
(paths, places, labels) is drawn once per camera position and reused; text surfaces are cached.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Any


def _import_pygame():
    """pygame, imported without its greeting line and without leaving ``PYGAME_HIDE_SUPPORT_PROMPT`` set."""
    added = "PYGAME_HIDE_SUPPORT_PROMPT" not in os.environ
    if added:
        os.environ["PYGAME_HIDE_SUPPORT_PROMPT"] = "1"
    try:
        import pygame
    finally:
        if added:
            del os.environ["PYGAME_HIDE_SUPPORT_PROMPT"]
    return pygame


pygame = _import_pygame()

from simulacra.clock import format_hhmm  # noqa: E402
from simulacra.viewer.layout import (  # noqa: E402
    GROUP_OVER,
    HELP_LINES,
    MARKER_RADIUS,
    Camera,
    Hit,
    Placement,
    Timeline,
    View,
    capacity,
    day_spans,
    group_radius,
    hit_test,
    label_order,
    nearest_distances,
    place_agents,
    ring_radius,
)
from simulacra.viewer.memory import TIERS as BROWSER_TIERS  # noqa: E402
from simulacra.viewer.memory import HeldSpan, MemoryDetail, MemoryRow  # noqa: E402
from simulacra.viewer.state import TIERS, ReplayState, TickState  # noqa: E402

BACKGROUND = (236, 230, 212)
MAP_EDGE = (200, 190, 165)
PATH = (168, 150, 120)
TEXT = (40, 36, 30)
MUTED = (110, 102, 90)
PANEL_BG = (38, 42, 52)
PANEL_TEXT = (232, 232, 236)
PANEL_MUTED = (160, 166, 180)
PANEL_ROW = (50, 55, 68)
PANEL_PICK = (72, 84, 118)
TOPBAR = (52, 58, 70)
BUBBLE = (255, 255, 250)
SELECTED = (255, 215, 0)
PLACE_FILL = {"home": (214, 190, 160), "shop": (232, 206, 128), "public": (182, 204, 226),
              "nature": (172, 212, 160), "work": (196, 196, 214)}
PLACE_OTHER = (205, 205, 205)
TIER_LABEL = {"static": "static", "short_term": "short-term", "long_term": "long-term", "shared": "shared"}
BAR_COLOURS = {"rec": (96, 170, 230), "imp": (240, 170, 60), "rel": (120, 200, 120)}
#: who-knows-what: how an agent first knew the picked news, and not knowing it
KNOW_COLOURS = {"held": (20, 110, 200), "seen": (40, 160, 60), "heard": (230, 130, 20), "told": (130, 60, 200),
                None: (175, 175, 175)}
#: the curve of the agents still holding a memory of the picked news, beside the curve of those who knew it
REMEMBERED_CURVE = (235, 235, 235)


def faded(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    """``colour`` washed out towards grey: an agent that knew the picked news and holds no memory of it now."""
    return (round(colour[0] * 0.5 + 175 * 0.5), round(colour[1] * 0.5 + 175 * 0.5), round(colour[2] * 0.5 + 175 * 0.5))
RELATION = (60, 90, 170)
TIMELINE_BG = (44, 49, 60)
EVENT_MARK = (235, 90, 60)
TALK_MARK = (110, 170, 235)
#: distinct marker colours, one per agent in the header's order (cycled past 12)
PALETTE = [(220, 50, 47), (38, 139, 210), (40, 160, 60), (211, 54, 130), (181, 137, 0), (108, 113, 196),
           (203, 75, 22), (42, 161, 152), (130, 60, 160), (90, 90, 90), (230, 120, 170), (20, 90, 60)]
TIMELINE_HEIGHT = 58
TOP = 40
#: the map's drawn canvas reaches this many pixels past each side of the map area (panning within it is a blit)
CANVAS_MARGIN = 360


@dataclass
class Overlay:
    """Playback status drawn over the frame: pause, speed, the number being typed, the help box."""

    paused: bool = False
    speed: float = 1.0
    seek_text: str | None = None
    help: bool = False
    message: str = ""




def _font(size: int, bold: bool = False) -> pygame.font.Font:
    if not pygame.font.get_init():
        pygame.font.init()
    f = pygame.font.Font(None, size)  # pygame's bundled font: the same pixels on every machine
    f.set_bold(bold)
    return f


def _lerp(a: tuple[float, float], b: tuple[float, float], t: float) -> tuple[float, float]:
    return a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t


@functools.lru_cache(maxsize=8192)
def _fit(font: pygame.font.Font, text: str, width: int) -> str:
    """``text`` cut with "..." to fit ``width`` pixels (cached: a frame fits the same strings again)."""
    if font.size(text)[0] <= width:
        return text
    while text and font.size(text + "...")[0] > width:
        text = text[:-1]
    return text.rstrip() + "..."


def wrap(font: pygame.font.Font, text: str, width: int, max_lines: int) -> list[str]:
    """Word-wrap ``text`` to ``width`` pixels, at most ``max_lines`` lines (the last one cut with "...")."""
    return list(_wrap(font, text, width, max_lines))


@functools.lru_cache(maxsize=4096)
def _wrap(font: pygame.font.Font, text: str, width: int, max_lines: int) -> tuple[str, ...]:
    lines: list[str] = []
    current = ""
    words = text.split()
    for i, word in enumerate(words):
        trial = f"{current} {word}".strip()
        if font.size(trial)[0] <= width or not current:
            current = trial
            continue
        lines.append(current)
        current = word
        if len(lines) == max_lines:
            lines[-1] = _fit(font, lines[-1] + " " + " ".join(words[i:]), width)
            return tuple(lines)
    if current:
        lines.append(_fit(font, current, width))
    if len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [_fit(font, " ".join(lines[max_lines - 1:]), width)]
    return tuple(lines)


def format_age(minutes: float | None) -> str:
    """Game minutes as ``"3d 2h"``, ``"2h 05m"``, ``"40m"``; ``"-"`` for ``None``."""
    if minutes is None:
        return "-"
    m = int(round(minutes))
    d, rest = divmod(m, 24 * 60)
    h, mm = divmod(rest, 60)
    if d:
        return f"{d}d {h}h"
    return f"{h}h {mm:02d}m" if h else f"{mm}m"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


class Renderer:
    """Draws replay frames of one run at a fixed surface size.

    Args:
        replay: the run (places, paths, agents, names).
        size: (width, height) of the surface in pixels; the side panel takes ``panel_width`` on the right, the
            timeline :data:`TIMELINE_HEIGHT` at the bottom of the map.
        group_over: a place with more agents than this shows them as one counted group until clicked.

    After :meth:`draw`: ``markers`` (agent id -> marker centre, pixels, for agents drawn one by one), ``groups``
    (place id -> :class:`~simulacra.viewer.layout.Group`), ``place_xy`` (place id -> centre), ``place_rects``
    (place id -> its square and label, for clicks), ``colours`` (agent id -> RGB), ``panel_lines`` (the panel's
    text, top to bottom), ``bubble_lines``, ``hotspots`` (``(pygame.Rect, action)``: what a click on the panel or
    the top bar does, e.g. ``("tier", "static")``, ``("memory", id)``), ``timeline`` (tick <-> pixel) and
    ``tooltip`` (the lines of the tooltip drawn, if any).
    """

    def __init__(self, replay: ReplayState, size: tuple[int, int] = (1280, 800), panel_width: int = 440,
                 group_over: int = GROUP_OVER):
        self.replay = replay
        self.group_over = group_over
        self._forgot: dict[str, HeldSpan] = {}  # with a news picked: knowers holding no memory of it (draw())
        self.size = size
        self.panel_width = panel_width
        self.top = TOP
        self.map_rect = pygame.Rect(0, self.top, size[0] - panel_width, size[1] - self.top - TIMELINE_HEIGHT)
        self.timeline_rect = pygame.Rect(0, size[1] - TIMELINE_HEIGHT, size[0] - panel_width, TIMELINE_HEIGHT)
        self.panel_rect = pygame.Rect(size[0] - panel_width, 0, panel_width, size[1])
        self.colours = {pid: PALETTE[i % len(PALETTE)] for i, pid in enumerate(replay.agents)}
        self.f_small, self.f_text = _font(18), _font(21)
        self.f_bold, self.f_title = _font(21, bold=True), _font(28, bold=True)
        self.f_marker = _font(18, bold=True)
        self.f_tiny = _font(14, bold=True)
        self.camera = Camera((self.map_rect.x, self.map_rect.y, self.map_rect.width, self.map_rect.height),
                             [tuple(p["position"]) for p in replay.places.values()])
        self._text_cache: dict[tuple[int, str, tuple[int, ...]], pygame.Surface] = {}
        self._sprites: dict[tuple, pygame.Surface] = {}
        self._layer: pygame.Surface | None = None
        self._layer_key: tuple | None = None
        self._label_rects: list[pygame.Rect] = []
        self._canvas_rects: dict[str, pygame.Rect] = {}
        self._canvas_labels: list[pygame.Rect] = []
        self.labelled: list[str] = []  # the places whose names are on the map, in the order they were placed
        self._canvas_pan: tuple[float, float] = (0.0, 0.0)
        self._shift_key: tuple[int, int] | None = None
        self._places_key: tuple | None = None
        self._at_cache: dict[int, dict[str, list[str]]] = {}
        self._rows_cache: dict[tuple, list[MemoryRow]] = {}
        self._talk_cache: tuple[int, dict[tuple[str, str], int]] | None = None
        self._timeline_layer: pygame.Surface | None = None
        self.max_bubbles = 12
        self._placements: dict[tuple, Placement] = {}
        self._counts_key: tuple | None = None
        self._spacing: dict[str, float] | None = None
        self._room_zoom: float | None = None
        self._room_cache: dict[str, int] = {}
        self._spacing_now: dict[str, float] = {}
        self._counts: tuple[dict[str, int], list[str]] = ({}, [])
        self._bubble_key: tuple | None = None
        self._bubble_pan: tuple[float, float] = (0.0, 0.0)
        self._bubbles: list[tuple[pygame.Surface, tuple[int, int]]] = []
        self._timeline_len = -1
        self._most: dict[str, int] = {}
        self._reach_seen = 0
        self._grow_reach()
        self.place_xy: dict[str, tuple[int, int]] = {}
        self.place_rects: dict[str, tuple[float, float, float, float]] = {}
        self._update_places()
        self.markers: dict[str, tuple[int, int]] = {}
        self.groups: dict = {}
        self.panel_lines: list[str] = []
        self.bubble_lines: list[str] = []
        self.hotspots: list[tuple[pygame.Rect, tuple]] = []
        self.tooltip: list[str] = []
        self.timeline = Timeline(replay.first_tick, replay.last_tick, self.timeline_rect.x + 12,
                                 self.timeline_rect.width - 24)

    # ----------------------------------------------------------------- caches
    def text(self, font: pygame.font.Font, text: str, colour: tuple[int, ...]) -> pygame.Surface:
        """``font.render(text)``, cached (a frame redraws the same strings)."""
        key = (id(font), text, colour)
        img = self._text_cache.get(key)
        if img is None:
            if len(self._text_cache) > 6000:
                self._text_cache.clear()
            img = self._text_cache[key] = font.render(text, True, colour)
        return img

    def _grow_reach(self) -> bool:
        """Take the ticks added since last time into each place's most agents at any tick (labels go below the
        room they take, so markers never cover them); returns whether a place needs more room than before."""
        grew = False
        for i in range(self._reach_seen, len(self.replay)):
            for place, pids in self.agents_at(self.replay.state_at(self.replay.first_tick + i)).items():
                if len(pids) > self._most.get(place, 0):
                    self._most[place] = len(pids)
                    grew = True
        self._reach_seen = len(self.replay)
        return grew

    def _label_room(self, place: str, expanded: bool = False) -> float:
        """Pixels below a place's centre its agents can take at any tick (its name goes below them)."""
        n = self._most.get(place, 0)
        limit = min(self.group_over, self._room().get(place, self.group_over))
        if n <= limit or expanded:
            return ring_radius(min(n, 24)) + MARKER_RADIUS + ((n - 1) // 24) * (2 * MARKER_RADIUS + 4)
        return group_radius(n)

    def _room(self) -> dict[str, int]:
        """Per place, how many markers fit around it at the current zoom (:func:`~simulacra.viewer.layout.capacity`
        of its nearest neighbour's distance on screen); computed once per zoom."""
        if self._room_zoom != self.camera.zoom:
            if self._spacing is None:  # world distances, scaled: pan does not change them
                base = Camera(self.camera.area, self.camera.points)
                self._spacing = nearest_distances({pid: base.to_screen(p["position"])
                                                   for pid, p in self.replay.places.items()})
            self._room_cache = {pid: capacity(d * self.camera.zoom) for pid, d in self._spacing.items()}
            self._spacing_now = {pid: d * self.camera.zoom for pid, d in self._spacing.items()}
            self._room_zoom = self.camera.zoom
        return self._room_cache

    def agents_at(self, state: TickState) -> dict[str, list[str]]:
        """Place id -> its agents at ``state``, in the header's order (cached per tick)."""
        got = self._at_cache.get(state.tick)
        if got is None:
            got = {}
            for pid in self.replay.agents:
                got.setdefault(state.agents[pid].place, []).append(pid)
            if len(self._at_cache) > 512:
                self._at_cache.clear()
            self._at_cache[state.tick] = got
        return got

    def _update_places(self) -> None:
        self.place_xy = {pid: (round(x), round(y)) for pid, (x, y) in
                         ((pid, self.camera.to_screen(p["position"])) for pid, p in self.replay.places.items())}

    # ----------------------------------------------------------------- layout (kept for callers of the old API)
    @staticmethod
    def ring_radius(n: int) -> float:
        """Radius of the ring of ``n`` markers around a place (0 for one agent alone)."""
        return ring_radius(n)

    def crowd(self, state: TickState) -> dict[str, int]:
        """Place id -> number of agents there at ``state``."""
        return {p: len(a) for p, a in self.agents_at(state).items()}

    def placement(self, state: TickState, expanded=()) -> Placement:
        """Where ``state``'s agents are drawn at the current camera (markers and counted groups; cached)."""
        key = (state.tick, frozenset(expanded), self.camera.key, self.group_over)
        got = self._placements.get(key)
        if got is None:
            if len(self._placements) > 64:
                self._placements.clear()
            got = self._placements[key] = place_agents(self.agents_at(state), self.place_xy, expanded,
                                                       self.group_over, default=self.map_rect.center,
                                                       room=self._room(), spacing=self._spacing_now)
        return got

    def slots(self, state: TickState) -> dict[str, tuple[float, float]]:
        """Marker centre of each agent at ``state`` as if no place were grouped."""
        return place_agents(self.agents_at(state), self.place_xy, expanded=set(self.replay.places),
                            default=self.map_rect.center).markers

    def agent_at(self, point: tuple[int, int]) -> str | None:
        """The agent whose marker (as last drawn) contains ``point``, nearest first; ``None`` if none."""
        hit = hit_test(point, self.markers, {}, {})
        return hit.id if hit is not None else None

    def hit(self, point: tuple[int, int]) -> Hit | None:
        """What ``point`` hits on the map as last drawn: an agent, a counted group or a place (``None``: nothing,
        or outside the map)."""
        if not self.map_rect.collidepoint(point):
            return None
        return hit_test(point, self.markers, self.groups, self.place_rects)

    def hotspot_at(self, point: tuple[int, int]) -> tuple | None:
        """The action of the panel or top-bar element under ``point`` as last drawn (the last drawn wins)."""
        for rect, action in reversed(self.hotspots):
            if rect.collidepoint(point):
                return action
        return None

    def memory_rows(self, agent: str, state: TickState, view: View) -> list[MemoryRow]:
        """The browser's rows for ``agent`` at ``state`` under ``view``'s filters (cached)."""
        key = (agent, state.tick, frozenset(view.tiers), None if view.kinds is None else frozenset(view.kinds),
               view.search)
        rows = self._rows_cache.get(key)
        if rows is None:
            if len(self._rows_cache) > 64:
                self._rows_cache.clear()
            rows = self._rows_cache[key] = self.replay.memory.rows(agent, state.tick, state.time, view.tiers,
                                                                   view.kinds, view.search)
        return rows

    def talked(self, tick: int) -> dict[tuple[str, str], int]:
        if self._talk_cache is None or self._talk_cache[0] != tick:
            self._talk_cache = (tick, self.replay.talked(tick))
        return self._talk_cache[1]

    # ----------------------------------------------------------------- drawing
    def draw(self, surface: pygame.Surface, state: TickState, selected: str | None = None,
             next_state: TickState | None = None, frac: float = 0.0, overlay: Overlay | None = None,
             view: View | None = None) -> None:
        """Draw ``state`` (agents moved ``frac`` of the way, 0..1, towards ``next_state``) on ``surface``, with the
        panel, overlays and filters of ``view`` (default: the agent panel, bubbles on)."""
        view = view or View()
        self.hotspots = []
        self.tooltip = []
        if len(self.replay) != self._reach_seen and self._grow_reach():  # a live run's new ticks crowd a place more
            self._layer_key = None
        opened = frozenset(view.expanded)
        if self._places_key != self.camera.key:
            self._update_places()
            self._places_key = self.camera.key
        if (self._layer_key != (self.camera.zoom, self.size, opened)
                or abs(self.camera.pan[0] - self._canvas_pan[0]) > CANVAS_MARGIN - 1
                or abs(self.camera.pan[1] - self._canvas_pan[1]) > CANVAS_MARGIN - 1):
            self._draw_layer(opened)
        self._blit_layer(surface)
        a = self.placement(state, view.expanded)
        b = self.placement(next_state, view.expanded) if next_state is not None else a
        t = max(0.0, min(1.0, frac))
        t = t * t * (3 - 2 * t)  # smoothstep: ease in and out of each walk
        self.groups = a.groups
        markers: dict[str, tuple[int, int]] = {}
        for pid in self.replay.agents:
            pa = a.markers.get(pid)
            pb = b.markers.get(pid) if next_state is not None else pa
            if pa is None and pb is None and (next_state is None or
                                              state.agents[pid].place == next_state.agents[pid].place):
                continue  # in a group, staying there
            if pa is None:
                pa = a.groups[state.agents[pid].place].centre
            if pb is None:
                pb = b.groups[next_state.agents[pid].place].centre if next_state is not None else pa
            x, y = _lerp(pa, pb, t)
            markers[pid] = (round(x), round(y))
        self.markers = markers
        if view.relations:
            self._draw_relations(surface, state, a)
        knowing = self.replay.knowers_at(view.news, state.tick) if view.panel == "news" and view.news else None
        self._forgot = {} if knowing is None or view.news is None else {
            a: span for a, span in self.replay.forgotten_at(view.news, state.tick).items() if a in knowing}
        if knowing is not None:
            self._draw_news_links(surface, knowing)
        if view.bubbles:
            self._draw_bubbles(surface, state, a, view.expanded)
        else:
            self.bubble_lines = []
        self._draw_groups(surface, state, selected, knowing)
        self._draw_agents(surface, selected, knowing)
        if view.place is not None and view.place in self.place_xy:
            r = pygame.Rect(0, 0, 42, 42)
            r.center = self.place_xy[view.place]
            pygame.draw.rect(surface, SELECTED, r, width=3, border_radius=9)
        self._draw_events(surface, state)
        self._draw_timeline(surface, state)
        self._draw_topbar(surface, state, overlay or Overlay())
        self._draw_panel(surface, state, selected, view)
        if view.hover is not None and not (overlay and overlay.help):
            self._draw_tooltip(surface, state, view.hover, knowing)
        if overlay is not None and overlay.help:
            self._draw_help(surface)

    def _draw_layer(self, expanded: frozenset[str] = frozenset()) -> None:
        """The map without agents (background, paths, places, names) for the current zoom, on a canvas reaching
        :data:`CANVAS_MARGIN` pixels past each side of the map area, so that panning blits it shifted instead of
        drawing it again."""
        m = CANVAS_MARGIN
        ox, oy = self.map_rect.x - m, self.map_rect.y - m  # the canvas's origin on the screen
        layer = pygame.Surface((self.map_rect.width + 2 * m, self.map_rect.height + 2 * m))
        layer.fill(BACKGROUND)
        area = layer.get_rect()
        xy = {pid: (x - ox, y - oy) for pid, (x, y) in self.place_xy.items()}
        zoom = self.camera.zoom
        width = max(2, min(8, round(5 * zoom ** 0.5)))
        for p, q in self.replay.paths:
            if p in xy and q in xy:
                pygame.draw.line(layer, PATH, xy[p], xy[q], width)
        side = max(10, min(34, round(34 * zoom ** 0.5))) if len(xy) > 60 else 34
        squares: dict[str, pygame.Rect] = {}
        for pid, (x, y) in xy.items():
            place = self.replay.places[pid]
            rect = pygame.Rect(0, 0, side, side)
            rect.center = (x, y)
            squares[pid] = rect
            if rect.colliderect(area):
                pygame.draw.rect(layer, PLACE_FILL.get(place["kind"], PLACE_OTHER), rect, border_radius=7)
                pygame.draw.rect(layer, MUTED, rect, width=1, border_radius=7)
        # names: places residents go to first, public places first among them, homes last (layout.label_order),
        # each below its place or, when that overlaps a name already placed, above it; else left out
        order = [pid for pid in label_order(self.replay.places, self.replay.destinations) if pid in xy]
        self.labelled = []
        labels: list[pygame.Rect] = []
        rects: dict[str, pygame.Rect] = {}
        for pid in order:
            x, y = xy[pid]
            sq = squares[pid]
            rects[pid] = sq
            if not area.collidepoint(x, y):
                continue
            img = self.text(self.f_small, self.replay.places[pid]["name"], TEXT)
            below = max(side // 2 + 4, self._label_room(pid, pid in expanded) + 4)
            lr = next((r for r in (img.get_rect(midtop=(x, y + below)), img.get_rect(midbottom=(x, y - below)))
                       if r.collidelist(labels) < 0 and area.contains(r)), None)  # below the place, else above
            if lr is None:
                continue
            labels.append(lr)
            self.labelled.append(pid)
            layer.fill(BACKGROUND, lr.inflate(6, 2))  # the name stays readable over the paths
            layer.blit(img, lr)
            rects[pid] = sq.union(lr)  # a click on the name selects the place too
        self._canvas_rects = rects
        self._canvas_labels = labels
        self._canvas_pan = self.camera.pan
        self._layer = layer
        self._layer_key = (self.camera.zoom, self.size, expanded)
        self._shift_key = None

    def _blit_layer(self, surface: pygame.Surface) -> None:
        """The map's canvas, shifted by the pan since it was drawn; ``place_rects`` and the names' rectangles on
        the screen follow."""
        m = CANVAS_MARGIN
        dx = round(self.camera.pan[0] - self._canvas_pan[0])
        dy = round(self.camera.pan[1] - self._canvas_pan[1])
        if self._shift_key != (dx, dy):
            ox, oy = self.map_rect.x - m + dx, self.map_rect.y - m + dy
            self.place_rects = {pid: (r.x + ox, r.y + oy, r.width, r.height) for pid, r in self._canvas_rects.items()}
            self._label_rects = [r.move(ox, oy) for r in self._canvas_labels]
            self._shift_key = (dx, dy)
        surface.blit(self._layer, self.map_rect.topleft,
                     pygame.Rect(m - dx, m - dy, self.map_rect.width, self.map_rect.height))
        pygame.draw.rect(surface, MAP_EDGE, self.map_rect.inflate(-16, -16), width=2, border_radius=10)

    def _marker(self, surface: pygame.Surface, pid: str, x: int, y: int, colour: tuple[int, int, int],
                selected: bool) -> None:
        """An agent's marker: a disc of its colour with a white rim and its initials (gold ring: selected), drawn
        once per agent, colour and selection and then blitted (one blit per marker and frame)."""
        key = (pid, colour, selected)
        sprite = self._sprites.get(key)
        if sprite is None:
            r = MARKER_RADIUS + 5
            sprite = pygame.Surface((2 * r + 1, 2 * r + 1), pygame.SRCALPHA)
            c = (r, r)
            if selected:
                pygame.draw.circle(sprite, SELECTED, c, MARKER_RADIUS + 5)
            pygame.draw.circle(sprite, (255, 255, 255), c, MARKER_RADIUS + 2)
            pygame.draw.circle(sprite, colour, c, MARKER_RADIUS)
            lum = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
            img = self.text(self.f_marker, self.replay.initials[pid], (0, 0, 0) if lum > 160 else (255, 255, 255))
            sprite.blit(img, img.get_rect(center=(r, r + 1)))
            if len(self._sprites) > 8000:
                self._sprites.clear()
            self._sprites[key] = sprite
        surface.blit(sprite, (x - MARKER_RADIUS - 5, y - MARKER_RADIUS - 5))

    def _draw_agents(self, surface: pygame.Surface, selected: str | None, knowing: dict[str, Any] | None) -> None:
        clip = self.map_rect
        for pid, (x, y) in self.markers.items():
            if pid == selected or not clip.collidepoint(x, y):
                continue
            self._marker(surface, pid, x, y, self._know_colour(pid, knowing), False)
        if selected in self.markers:  # on top of the others
            x, y = self.markers[selected]
            self._marker(surface, selected, x, y, self._know_colour(selected, knowing), True)

    def _know_colour(self, pid: str, knowing: dict[str, Any] | None) -> tuple[int, int, int]:
        """An agent's marker colour: its own, or with a news picked how it first knew the news (faded when it
        holds no memory of it any more)."""
        if knowing is None:
            return self.colours[pid]
        colour = KNOW_COLOURS[getattr(knowing.get(pid), "how", None)]
        return faded(colour) if pid in self._forgot else colour

    def _draw_groups(self, surface: pygame.Surface, state: TickState, selected: str | None,
                     knowing: dict[str, Any] | None) -> None:
        for g in self.groups.values():
            x, y = round(g.centre[0]), round(g.centre[1])
            r = round(g.radius)
            if selected in g.agents:
                pygame.draw.circle(surface, SELECTED, (x, y), r + 5)
            pygame.draw.circle(surface, (255, 255, 255), (x, y), r + 2)
            pygame.draw.circle(surface, (70, 78, 96), (x, y), r)
            label = str(len(g.agents))
            if knowing is not None:  # the share that knows the news: a filled wedge
                k = sum(1 for a in g.agents if a in knowing)
                if k:
                    end = -math.pi / 2 + 2 * math.pi * k / len(g.agents)
                    pts = [(x, y)] + [(x + r * math.cos(-math.pi / 2 + (end + math.pi / 2) * i / 24),
                                       y + r * math.sin(-math.pi / 2 + (end + math.pi / 2) * i / 24))
                                      for i in range(25)]
                    pygame.draw.polygon(surface, KNOW_COLOURS["heard"], pts)
                label = f"{k}/{len(g.agents)}"
            if r >= 9:  # a disc too small for its count says it in the tooltip
                img = self.text(self.f_marker if r >= 12 else self.f_tiny, label, (255, 255, 255))
                surface.blit(img, img.get_rect(center=(x, y + 1)))

    def _draw_relations(self, surface: pygame.Surface, state: TickState, a: Placement) -> None:
        """Who talked with whom up to the tick: a line per pair, wider with more conversations."""
        def where(pid: str):
            if pid in self.markers:
                return self.markers[pid]
            g = a.groups.get(state.agents[pid].place)
            return g.centre if g is not None else None

        for (p, q), n in self.talked(state.tick).items():
            u, v = where(p), where(q)
            if u is None or v is None or u == v:
                continue
            pygame.draw.line(surface, RELATION, u, v, max(1, min(9, 1 + 2 * (n - 1) if n < 5 else 9)))

    def _draw_news_links(self, surface: pygame.Surface, knowing: dict[str, Any]) -> None:
        """From whom each agent heard the picked news: a line from the teller to the listener."""
        for pid, w in knowing.items():
            if w.source in self.markers and pid in self.markers:
                pygame.draw.line(surface, KNOW_COLOURS[w.how], self.markers[w.source], self.markers[pid], 2)

    def _draw_bubbles(self, surface: pygame.Surface, state: TickState, a: Placement, expanded) -> None:
        """The tick's bubbles, laid out once per tick, camera and crowd (:meth:`_layout_bubbles`)."""
        key = (state.tick, self.camera.zoom, frozenset(expanded), self.size)
        if self._bubble_key != key:
            self._bubbles, self.bubble_lines = self._layout_bubbles(state, a)
            self._bubble_key = key
            self._bubble_pan = self.camera.pan
        dx = round(self.camera.pan[0] - self._bubble_pan[0])  # panned since: the bubbles follow the map
        dy = round(self.camera.pan[1] - self._bubble_pan[1])
        surface.set_clip(self.map_rect)
        for img, pos in self._bubbles:
            surface.blit(img, (pos[0] + dx, pos[1] + dy))
        surface.set_clip(None)

    def _layout_bubbles(self, state: TickState, a: Placement) -> tuple[list[tuple[pygame.Surface, tuple[int, int]]],
                                                                         list[str]]:
        """One bubble per conversation near its place: "XY: what was said", one line per turn; clear of the
        markers, the groups, the place names and the other bubbles. Past the first few, a bubble that finds no free
        spot is left out (a crowded town would be a heap of bubbles): at most :attr:`max_bubbles`."""
        lines_out: list[str] = []
        out: list[tuple[pygame.Surface, tuple[int, int]]] = []
        convs: dict[tuple[str, frozenset], list] = {}
        for u in state.utterances:
            convs.setdefault((u.place, frozenset((u.speaker, u.listener))), []).append(u)
        if not convs:
            return out, lines_out
        placed: list[pygame.Rect] = list(self._label_rects)  # place names, marker rings: what a bubble must not cover
        for place, reach in a.reach.items():
            r = round(reach + 3)
            ring = pygame.Rect(0, 0, 2 * r, 2 * r)
            ring.center = self.place_xy.get(place, self.map_rect.center)
            placed.append(ring)
        width = 300
        lh = self.f_small.get_linesize()
        for (place, _), lines in convs.items():
            if len(out) >= self.max_bubbles:
                break
            cx, cy = self.place_xy.get(place, self.map_rect.center)
            if not self.map_rect.collidepoint(cx, cy):
                continue
            text_lines: list[tuple[str, tuple[int, int, int]]] = []
            said: list[str] = []
            for u in lines[:4]:
                for i, ln in enumerate(wrap(self.f_small, f"{self.replay.initials[u.speaker]}: {u.text}", width, 2)):
                    text_lines.append(("    " + ln if i else ln, self.colours[u.speaker]))
                    said.append(ln)
            if len(lines) > 4:
                text_lines.append((f"... {len(lines) - 4} more lines", MUTED))
            rect = pygame.Rect(0, 0, max(self.f_small.size(t)[0] for t, _ in text_lines) + 16,
                               lh * len(text_lines) + 12)
            reach = a.reach.get(place, MARKER_RADIUS) + 12
            clear = self._place_bubble(rect, (cx, cy), reach, placed)
            if not clear and len(out) >= 3:
                continue
            placed.append(rect)
            lines_out += said
            above = rect.bottom <= cy
            img = pygame.Surface((rect.width, rect.height + 11), pygame.SRCALPHA)
            body = pygame.Rect(0, 0 if above else 11, rect.width, rect.height)
            tip_x = max(10, min(rect.width - 10, cx - rect.x))
            if above:
                tip = [(tip_x - 7, body.bottom - 1), (tip_x + 7, body.bottom - 1), (tip_x, body.bottom + 9)]
            else:
                tip = [(tip_x - 7, body.top + 1), (tip_x + 7, body.top + 1), (tip_x, body.top - 9)]
            pygame.draw.polygon(img, BUBBLE, tip)
            pygame.draw.rect(img, BUBBLE, body, border_radius=8)
            pygame.draw.rect(img, MUTED, body, width=1, border_radius=8)
            for i, (t, colour) in enumerate(text_lines):
                speaker_part, sep, rest = t.partition(": ")
                x, y = 8, body.y + 6 + i * lh
                if sep and not t.startswith(" "):
                    part = self.text(self.f_small, speaker_part + sep, colour)
                    img.blit(part, (x, y))
                    x += part.get_width()
                    t = rest
                img.blit(self.text(self.f_small, t, TEXT), (x, y))
            out.append((img, (rect.x, rect.y if above else rect.y - 11)))
        return out, lines_out

    def _place_bubble(self, rect: pygame.Rect, centre: tuple[int, int], reach: float,
                      placed: list[pygame.Rect]) -> bool:
        """Move ``rect`` next to ``centre`` (above it, else below, else the least covering spot), clear of
        ``placed`` (bubbles, marker rings, place names), inside the map; returns whether the spot is clear."""
        area = self.map_rect.inflate(-20, -20)
        cx, cy = centre
        best = None
        for k in range(14):
            for dx in (0, -rect.width // 2 - 20, rect.width // 2 + 20):
                for side, y in (("above", cy - reach - k * 22), ("below", cy + reach + k * 22)):
                    r = rect.copy()
                    if side == "above":
                        r.midbottom = (cx + dx, int(y))
                    else:
                        r.midtop = (cx + dx, int(y))
                    r.clamp_ip(area)
                    if side == "above" and r.bottom > cy - reach + 1 or side == "below" and r.top < cy + reach - 1:
                        continue  # clamping pushed it onto its own place
                    hits = r.collidelistall(placed)
                    if not hits:
                        rect.topleft = r.topleft
                        return True
                    overlap = len(hits)  # the spot covering the fewest things
                    if best is None or overlap < best[0]:
                        best = (overlap, r.topleft)
        if best is not None:
            rect.topleft = best[1]
        else:
            rect.midbottom = (cx, int(cy - reach))
            rect.clamp_ip(area)
        return False

    def _draw_events(self, surface: pygame.Surface, state: TickState) -> None:
        y = self.map_rect.bottom - 10
        for ev in reversed(state.events[-2:]):
            img = self.text(self.f_small, _fit(self.f_small, f"event: {ev}", self.map_rect.width - 40), (150, 40, 30))
            y -= img.get_height() + 2
            surface.blit(img, (self.map_rect.x + 20, y))

    # ----------------------------------------------------------------- timeline
    def _draw_timeline_layer(self) -> None:
        r = self.replay
        self.timeline = Timeline(r.first_tick, r.last_tick, self.timeline_rect.x + 12, self.timeline_rect.width - 24)
        tl = self.timeline
        layer = pygame.Surface(self.timeline_rect.size)
        layer.fill(TIMELINE_BG)
        ox = self.timeline_rect.x
        bar_y, bar_h = 20, 18
        pygame.draw.rect(layer, (70, 76, 92), (tl.x - ox, bar_y, tl.width, bar_h), border_radius=4)
        states = [r.state_at(t) for t in range(r.first_tick, r.last_tick + 1)]
        for day, t0, _ in day_spans([s.time for s in states], r.first_tick):
            x0 = tl.x_of(t0) - tl.slot / 2 - ox
            pygame.draw.line(layer, (150, 156, 170), (x0, 4), (x0, bar_y + bar_h), 1)
            when = states[t0 - r.first_tick].when or f"day {day}"
            name = when.rsplit(" ", 1)[0] if when[-3:-2] == ":" else when
            img = self.text(self.f_small, name, PANEL_MUTED)
            if x0 + img.get_width() < tl.x + tl.width - ox or t0 == r.first_tick:
                layer.blit(img, (x0 + 4, 3))
        # hours along the bar
        for s in states:
            if s.time % 60 == 0 and s.time % (3 * 60) == 0:
                x = tl.x_of(s.tick) - tl.slot / 2 - ox
                img = self.text(self.f_small, format_hhmm(s.time), (120, 126, 140))
                if x + img.get_width() + 2 < tl.width + tl.x - ox:
                    layer.blit(img, (x + 2, bar_y + bar_h + 2))
                pygame.draw.line(layer, (100, 106, 120), (x, bar_y), (x, bar_y + bar_h), 1)
        for s in states:
            x = round(tl.x_of(s.tick) - ox)
            if s.utterances:
                h = min(bar_h - 4, 3 + len(s.utterances))
                pygame.draw.line(layer, TALK_MARK, (x, bar_y + bar_h - 2), (x, bar_y + bar_h - 2 - h), 2)
            if s.events:
                pygame.draw.polygon(layer, EVENT_MARK, [(x - 5, bar_y - 1), (x + 5, bar_y - 1), (x, bar_y + 7)])
        self._timeline_layer = layer
        self._timeline_len = len(r)

    def _draw_timeline(self, surface: pygame.Surface, state: TickState) -> None:
        if self._timeline_layer is None or self._timeline_len != len(self.replay):
            self._draw_timeline_layer()
        surface.blit(self._timeline_layer, self.timeline_rect.topleft)
        tl = self.timeline
        x0 = tl.x + (state.tick - tl.first) * tl.slot
        y = self.timeline_rect.y + 20
        done = pygame.Rect(round(tl.x), y, max(1, round(x0 - tl.x)), 18)
        shade = pygame.Surface(done.size, pygame.SRCALPHA)
        shade.fill((255, 215, 0, 60))
        surface.blit(shade, done)
        cur = pygame.Rect(round(x0), y - 4, max(3, round(tl.slot)), 26)
        pygame.draw.rect(surface, SELECTED, cur, border_radius=2)

    # ----------------------------------------------------------------- top bar, tooltip, help
    def _draw_topbar(self, surface: pygame.Surface, state: TickState, overlay: Overlay) -> None:
        bar = pygame.Rect(0, 0, self.map_rect.width, self.top)
        pygame.draw.rect(surface, TOPBAR, bar)
        r = self.replay
        clock = self.text(self.f_title, state.when or state.clock, (255, 255, 255))
        surface.blit(clock, (12, (self.top - clock.get_height()) // 2))
        status = "paused" if overlay.paused else f"playing x{overlay.speed:g}"
        info = f"{r.world_name}   tick {state.tick} / {r.last_tick}   {status}"
        if overlay.seek_text is not None:
            info += f"   go to tick: {overlay.seek_text}_"
        if overlay.message:
            info += f"   {overlay.message}"
        img = self.text(self.f_text, _fit(self.f_text, info, bar.width - clock.get_width() - 60), PANEL_TEXT)
        surface.blit(img, (clock.get_width() + 30, (self.top - img.get_height()) // 2))
        hint = self.text(self.f_small, "H: help", PANEL_MUTED)
        hr = hint.get_rect(midright=(bar.right - 10, self.top // 2))
        surface.blit(hint, hr)
        self.hotspots.append((hr.inflate(8, 8), ("help",)))

    def tooltip_lines(self, state: TickState, point: tuple[int, int], knowing: dict[str, Any] | None = None
                      ) -> list[str]:
        """What the tooltip at ``point`` says (``[]``: nothing under it): an agent, a crowd, a place, a tick of the
        timeline, or a memory of the browser (its whole text)."""
        if self.panel_rect.collidepoint(point):
            action = self.hotspot_at(point)
            if action is not None and action[0] == "memory":
                for rows in self._rows_cache.values():
                    row = next((r for r in rows if r.id == action[1]), None)
                    if row is not None:
                        return wrap(self.f_small, row.text, 360, 8)
            return []
        if self.timeline_rect.collidepoint(point):
            t = self.timeline.tick_at(point[0])
            s = self.replay.state_at(t)
            out = [f"tick {t}: {s.when or s.clock}"]
            out += [f"event: {e}" for e in s.events[:2]]
            if s.utterances:
                out.append(f"{len(s.utterances)} lines said")
            return out
        hit = self.hit(point)
        if hit is None:
            return []
        if hit.kind == "agent":
            a = state.agents[hit.id]
            out = [a.name, f"{'asleep' if a.asleep else a.action_type}: {a.activity}", f"at {a.place_name}"]
            if knowing is not None:
                w = knowing.get(hit.id)
                out.append("does not know the news" if w is None else self._learned(w))
                if hit.id in self._forgot:
                    out.append(self._forgotten(self._forgot[hit.id], state))
            return out
        if hit.kind == "group":
            n = len(self.groups[hit.id].agents)
            return [f"{n} agents at {self.replay.places[hit.id]['name']}", "click to show them one by one"]
        place = self.replay.places[hit.id]
        n = len(self.agents_at(state).get(hit.id, ()))
        return [f"{place['name']} ({place['kind']})", f"{n} here; click for who and its objects"]

    def _forgotten(self, span: HeldSpan, state: TickState) -> str:
        """"forgot it at 14:00 (consolidation: importance <= 6)": when and why an agent let go of its last memory of
        the picked news (the day too when it is not ``state`` 's)."""
        gone = self.replay.state_at(span.end if span.end is not None else state.tick)
        at = gone.clock if self.replay.day_of(gone.tick) == self.replay.day_of(state.tick) else \
            f"day {self.replay.day_of(gone.tick)} {gone.clock}"
        return f"forgot it at {at}" + (f" ({span.reason})" if span.reason else "")

    def _learned(self, w: Any) -> str:
        when = format_hhmm(w.time)
        if w.how == "heard":
            return f"heard it from {self.replay.names.get(w.source, w.source)} at {when}"
        if w.how == "told":
            return f"told by the scenario{' (' + w.source + ')' if w.source else ''} at {when}"
        if w.how == "held":
            return "knew it from the start"
        return f"saw it at {when}"

    def _draw_tooltip(self, surface: pygame.Surface, state: TickState, point: tuple[int, int],
                      knowing: dict[str, Any] | None) -> None:
        lines = self.tooltip_lines(state, point, knowing)
        self.tooltip = lines
        if not lines:
            return
        imgs = [self.text(self.f_small, _fit(self.f_small, t, 360), (255, 255, 255)) for t in lines]
        box = pygame.Rect(point[0] + 16, point[1] + 12, max(i.get_width() for i in imgs) + 14,
                          sum(i.get_height() + 2 for i in imgs) + 10)
        if box.right > self.size[0]:
            box.right = point[0] - 8
        box.x = max(0, box.x)
        if box.bottom > self.size[1]:
            box.bottom = point[1] - 8
        pygame.draw.rect(surface, (25, 28, 36), box, border_radius=6)
        pygame.draw.rect(surface, (120, 126, 140), box, width=1, border_radius=6)
        y = box.y + 5
        for img in imgs:
            surface.blit(img, (box.x + 7, y))
            y += img.get_height() + 2

    def _draw_help(self, surface: pygame.Surface) -> None:
        lh = self.f_small.get_linesize() + 2
        box = pygame.Rect(0, 0, 560, lh * (len(HELP_LINES) + 2) + 20)
        box.center = (self.map_rect.centerx, self.size[1] // 2)
        shade = pygame.Surface(box.size, pygame.SRCALPHA)
        shade.fill((20, 22, 28, 235))
        surface.blit(shade, box)
        surface.blit(self.text(self.f_bold, "Controls", (255, 255, 255)), (box.x + 18, box.y + 12))
        for i, (key, what) in enumerate(HELP_LINES):
            y = box.y + 18 + lh * (i + 1)
            surface.blit(self.text(self.f_small, key, SELECTED), (box.x + 18, y))
            surface.blit(self.text(self.f_small, what, PANEL_TEXT), (box.x + 190, y))

    # ----------------------------------------------------------------- the side panel
    def _draw_panel(self, surface: pygame.Surface, state: TickState, selected: str | None, view: View) -> None:
        pygame.draw.rect(surface, PANEL_BG, self.panel_rect)
        self.panel_lines = []
        x = self.panel_rect.x + 16
        # the tabs
        tx = x
        for key, label in (("agent", "Agent"), ("memory", "Memories"), ("place", "Place"), ("news", "News")):
            img = self.text(self.f_bold if view.panel == key else self.f_text, label,
                            (255, 255, 255) if view.panel == key else PANEL_MUTED)
            tab = pygame.Rect(tx - 6, 8, img.get_width() + 12, 26)
            if view.panel == key:
                pygame.draw.rect(surface, PANEL_PICK, tab, border_radius=5)
            surface.blit(img, (tx, 13))
            self.hotspots.append((tab, ("panel", key)))
            tx += tab.width + 6
        y = 44
        if view.panel == "memory":
            self._panel_memory(surface, state, selected, view, x, y)
        elif view.panel == "place":
            self._panel_place(surface, state, selected, view, x, y)
        elif view.panel == "news":
            self._panel_news(surface, state, view, x, y)
        else:
            self._panel_agent(surface, state, selected, x, y)

    def _liner(self, surface: pygame.Surface, x: int, y: int):
        """A function writing one panel line at a time (returns the next y)."""
        bottom = self.panel_rect.bottom - 10
        pos = [y]

        def line(text: str, font=None, colour=PANEL_TEXT, indent: int = 0, gap: int = 0) -> int:
            font = font or self.f_text
            self.panel_lines.append(text)
            if pos[0] + font.get_linesize() <= bottom:
                surface.blit(self.text(font, text, colour), (x + indent, pos[0]))
            pos[0] += font.get_linesize() + gap
            return pos[0]
        return line, pos

    def _agent_title(self, surface: pygame.Surface, pid: str, x: int, y: int) -> int:
        name = self.replay.names[pid]
        pygame.draw.circle(surface, self.colours[pid], (x + 12, y + 13), 12)
        img = self.text(self.f_title, name, PANEL_TEXT)
        surface.blit(img, (x + 32, y))
        self.panel_lines.append(name)
        return y + img.get_height() + 6

    def _panel_agent(self, surface: pygame.Surface, state: TickState, selected: str | None, x: int, y: int) -> None:
        width = self.panel_rect.width - 32
        line, pos = self._liner(surface, x, y)
        if selected is None or selected not in state.agents:
            line("Click an agent or press Tab", self.f_bold)
            return
        a = state.agents[selected]
        pos[0] = self._agent_title(surface, selected, x, pos[0])
        line(f"at {a.place_name}", colour=PANEL_MUTED)
        for ln in wrap(self.f_text, f"{'asleep' if a.asleep else a.action_type}: {a.activity}", width, 2):
            line(ln)
        pos[0] += 4
        counts = "   ".join(f"{TIER_LABEL[t]} {'?' if a.counts.get(t) is None else a.counts[t]}" for t in TIERS)
        line("memories: " + counts, self.f_small, PANEL_MUTED)
        line("M: browse them with their scores", self.f_small, PANEL_MUTED, gap=6)
        if a.plan:
            line(f"plan for the day ({a.plan_source})", self.f_bold)
            for item in a.plan[:6]:
                for ln in wrap(self.f_small, item, width, 1):
                    line(ln, self.f_small, PANEL_MUTED)
            pos[0] += 6
        r = a.last_retrieval
        if r is None:
            line("no retrieval yet", self.f_bold)
            return
        line(f"last retrieval (tick {r.tick}, {r.purpose})", self.f_bold)
        for ln in wrap(self.f_small, f"query: {r.query}", width, 2):
            line(ln, self.f_small, PANEL_MUTED)
        pos[0] += 6
        if not r.results:
            line("nothing above the threshold", self.f_small, PANEL_MUTED)
        bottom = self.panel_rect.bottom - 10
        for i, m in enumerate(r.results):
            if pos[0] + 90 > bottom:
                line(f"... {len(r.results) - i} more", self.f_small, PANEL_MUTED)
                break
            pygame.draw.line(surface, (70, 76, 90), (x, pos[0] - 3), (x + width, pos[0] - 3))
            for ln in wrap(self.f_small, m.text, width, 2):
                line(ln, self.f_small)
            line(f"{TIER_LABEL.get(m.tier, m.tier)} {m.kind}   score {m.score:.3f}", self.f_small, PANEL_MUTED)
            pos[0] = self._bars(surface, x, pos[0], width, m.recency, m.importance, m.relevance)

    def _bars(self, surface: pygame.Surface, x: int, y: int, width: int, rec: float | None, imp: float | None,
              rel: float | None) -> int:
        """Three score-term bars (recency, importance, relevance, each 0..1); returns the next y."""
        bar_w = (width - 12) // 3
        for j, (key, value) in enumerate((("rec", rec), ("imp", imp), ("rel", rel))):
            bx = x + j * (bar_w + 6)
            label = f"{key} {'-' if value is None else f'{value:.2f}'}"
            self.panel_lines.append(label)
            box = pygame.Rect(bx, y, bar_w, 16)
            pygame.draw.rect(surface, (60, 66, 80), box, border_radius=3)
            if value is not None:
                fill = box.copy()
                fill.width = max(1, round(bar_w * max(0.0, min(1.0, value))))
                pygame.draw.rect(surface, BAR_COLOURS[key], fill, border_radius=3)
            img = self.text(self.f_small, label, (255, 255, 255) if value is None else (20, 20, 20))
            surface.blit(img, (bx + 4, y + 1))
        return y + 26

    def _chip(self, surface: pygame.Surface, x: int, y: int, label: str, on: bool, action: tuple) -> int:
        img = self.text(self.f_small, label, (255, 255, 255) if on else PANEL_MUTED)
        r = pygame.Rect(x, y, img.get_width() + 12, 20)
        pygame.draw.rect(surface, PANEL_PICK if on else PANEL_ROW, r, border_radius=9)
        surface.blit(img, (x + 6, y + 3))
        self.hotspots.append((r, action))
        self.panel_lines.append(("[x] " if on else "[ ] ") + label)
        return r.right + 5

    def _panel_memory(self, surface: pygame.Surface, state: TickState, selected: str | None, view: View,
                      x: int, y: int) -> None:
        width = self.panel_rect.width - 32
        if selected is None or selected not in state.agents:
            self._liner(surface, x, y)[0]("Click an agent or press Tab", self.f_bold)
            return
        y = self._agent_title(surface, selected, x, y)
        key = (selected, state.tick)
        if self._counts_key != key:  # per agent and tick, not per frame
            self._counts_key = key
            self._counts = (self.replay.memory.counts(selected, state.tick), self.replay.memory.kinds(selected))
        rows_all, kinds = self._counts
        self.panel_lines.append(f"memories at tick {state.tick} ({state.clock})")
        # tier chips, with the number held in each
        cx = x
        for tier in BROWSER_TIERS:
            cx = self._chip(surface, cx, y, f"{TIER_LABEL[tier]} {rows_all.get(tier, 0)}", tier in view.tiers,
                            ("tier", tier))
        y += 25
        cx = x
        for kind in kinds:
            label = kind
            w = self.f_small.size(label)[0] + 17
            if cx + w > x + width:
                cx = x
                y += 23
            cx = self._chip(surface, cx, y, label, view.kinds is None or kind in view.kinds, ("kind", kind))
        y += 25
        # the search box
        box = pygame.Rect(x, y, width, 24)
        pygame.draw.rect(surface, (30, 33, 42), box, border_radius=4)
        pygame.draw.rect(surface, SELECTED if view.searching else (90, 96, 110), box, width=1, border_radius=4)
        shown = view.search + ("_" if view.searching else "")
        text = f"search: {shown}" if shown else "search: (click or /)"
        surface.blit(self.text(self.f_small, _fit(self.f_small, text, width - 12), PANEL_TEXT if shown else
                               PANEL_MUTED), (x + 6, y + 5))
        self.hotspots.append((box, ("search",)))
        self.panel_lines.append(text)
        y += 30
        rows = self.memory_rows(selected, state, view)
        detail = (self.replay.memory.detail(selected, view.memory, state.tick, state.time)
                  if view.memory is not None else None)
        list_bottom = (self.panel_rect.bottom - 10) if detail is None else y + (self.panel_rect.bottom - y) * 2 // 5
        head = f"{len(rows)} memories" + ("" if not view.search else f' with "{view.search}"')
        surface.blit(self.text(self.f_small, head, PANEL_MUTED), (x, y))
        self.panel_lines.append(head)
        y += 20
        row_h = 2 * self.f_small.get_linesize() + 6
        start = min(view.scroll.get("memory", 0), max(0, len(rows) - 1))
        view.scroll["memory"] = start
        tier = None
        for i in range(start, len(rows)):
            row = rows[i]
            if y + row_h > list_bottom:
                more = f"... {len(rows) - i} more (wheel or Page Down)"
                surface.blit(self.text(self.f_small, more, PANEL_MUTED), (x, list_bottom - 16))
                self.panel_lines.append(more)
                break
            if row.tier != tier:
                tier = row.tier
            rect = pygame.Rect(x - 4, y, width + 8, row_h - 2)
            pygame.draw.rect(surface, PANEL_PICK if row.id == view.memory else PANEL_ROW, rect, border_radius=4)
            meta = (f"{TIER_LABEL[row.tier]}  {row.kind}  imp {'-' if row.rating is None else row.rating}"
                    f"  age {format_age(row.age_minutes)}"
                    f"  acc {'-' if row.last_access is None else format_hhmm(row.last_access)}"
                    f"  x{row.retrieved}")
            surface.blit(self.text(self.f_small, meta, PANEL_MUTED), (x, y + 2))
            body = _fit(self.f_small, row.text, width)
            surface.blit(self.text(self.f_small, body, PANEL_TEXT), (x, y + 2 + self.f_small.get_linesize()))
            self.panel_lines += [meta, body]
            self.hotspots.append((rect, ("memory", row.id)))
            y += row_h
        if detail is not None:
            self._memory_detail(surface, detail, x, max(y, list_bottom) + 6, width)

    def _memory_detail(self, surface: pygame.Surface, d: MemoryDetail, x: int, y: int, width: int) -> None:
        pygame.draw.line(surface, SELECTED, (x, y - 3), (x + width, y - 3), 2)
        line, pos = self._liner(surface, x, y)
        for ln in wrap(self.f_small, d.row.text, width, 3):
            line(ln, self.f_small)
        when = "before the run" if d.row.timestamp is None else format_hhmm(d.row.timestamp)
        line(f"{TIER_LABEL[d.row.tier]} {d.row.kind}, formed {when}, importance "
             f"{_num(d.row.importance)}", self.f_small, PANEL_MUTED)
        if d.evidence:
            line(f"evidence ({len(d.evidence)} memories, depth {d.depth}):", self.f_bold)
            for _, text in d.evidence[:4]:
                line(_fit(self.f_small, "- " + text, width), self.f_small, PANEL_MUTED)
            if len(d.evidence) > 4:
                line(f"... {len(d.evidence) - 4} more", self.f_small, PANEL_MUTED)
        line(f"returned by {len(d.retrievals)} retrievals" + (":" if d.retrievals else ""), self.f_bold)
        bottom = self.panel_rect.bottom - 10
        for acc in reversed(d.retrievals):  # newest first
            if pos[0] + 60 > bottom:
                line("... (older ones not shown)", self.f_small, PANEL_MUTED)
                break
            w = "" if acc.weights is None else "  w " + "/".join(f"{v:g}" for v in acc.weights)
            line(f"tick {acc.tick} {format_hhmm(acc.time)}  #{acc.rank}  score {_num(acc.score)}{w}", self.f_small)
            line(_fit(self.f_small, f"{acc.purpose}: {acc.query}", width), self.f_small, PANEL_MUTED)
            pos[0] = self._bars(surface, x, pos[0], width, acc.recency, acc.importance, acc.relevance)

    def _panel_place(self, surface: pygame.Surface, state: TickState, selected: str | None, view: View,
                     x: int, y: int) -> None:
        width = self.panel_rect.width - 32
        line, pos = self._liner(surface, x, y)
        if view.place is None or view.place not in self.replay.places:
            line("Click a place on the map", self.f_bold)
            return
        place = self.replay.places[view.place]
        line(place["name"], self.f_title)
        line(place["kind"], self.f_small, PANEL_MUTED, gap=6)
        objects = self.replay.objects_at(view.place, state.tick)
        line(f"objects ({len(objects)})", self.f_bold)
        for name, st in objects[:8]:
            line(_fit(self.f_small, f"{name}: {st or '?'}", width), self.f_small, PANEL_MUTED)
        if not objects:
            line("none", self.f_small, PANEL_MUTED)
        pos[0] += 6
        here = self.agents_at(state).get(view.place, [])
        line(f"here at {state.clock}: {len(here)}", self.f_bold)
        start = min(view.scroll.get("place", 0), max(0, len(here) - 1))
        view.scroll["place"] = start
        bottom = self.panel_rect.bottom - 10
        row_h = 2 * self.f_small.get_linesize() + 4
        for i in range(start, len(here)):
            pid = here[i]
            if pos[0] + row_h > bottom:
                line(f"... {len(here) - i} more (wheel)", self.f_small, PANEL_MUTED)
                break
            a = state.agents[pid]
            rect = pygame.Rect(x - 4, pos[0], width + 8, row_h - 2)
            pygame.draw.rect(surface, PANEL_PICK if pid == selected else PANEL_ROW, rect, border_radius=4)
            pygame.draw.circle(surface, self.colours[pid], (x + 8, pos[0] + 9), 6)
            self.hotspots.append((rect, ("agent", pid)))
            line(a.name, self.f_small, indent=20)
            line(_fit(self.f_small, f"{'asleep' if a.asleep else a.action_type}: {a.activity}", width - 20),
                 self.f_small, PANEL_MUTED, indent=20, gap=4)

    def _panel_news(self, surface: pygame.Surface, state: TickState, view: View, x: int, y: int) -> None:
        width = self.panel_rect.width - 32
        news = self.replay.news_list()
        line, pos = self._liner(surface, x, y)
        line("Who knows what: pick a news", self.f_bold)
        if not news:
            line("this run has no news", self.f_small, PANEL_MUTED)
            return
        line("knew it / of all (still remember it)", self.f_small, PANEL_MUTED)
        n_agents = len(self.replay.agents)
        list_bottom = pos[0] + min(len(news), 6) * 22 + 4
        start = min(view.scroll.get("news", 0), max(0, len(news) - 1))
        view.scroll["news"] = start
        for item in news[start:]:
            if pos[0] + 22 > list_bottom:
                break
            k = len(self.replay.knowers_at(item.topic, state.tick))
            r = len(self.replay.remembering_at(item.topic, state.tick))
            rect = pygame.Rect(x - 4, pos[0], width + 8, 20)
            pygame.draw.rect(surface, PANEL_PICK if item.topic == view.news else PANEL_ROW, rect, border_radius=4)
            self.hotspots.append((rect, ("news", item.topic)))
            text = _fit(self.f_small, f"{k:>3}/{n_agents} ({r})  {item.topic}", width - 4)
            surface.blit(self.text(self.f_small, text, PANEL_TEXT), (x, pos[0] + 3))
            self.panel_lines.append(text)
            pos[0] += 22
        pos[0] = list_bottom + 6
        if view.news is None:
            line("click a news to colour the agents", self.f_small, PANEL_MUTED)
            return
        knowing = self.replay.knowers_at(view.news, state.tick)
        for ln in wrap(self.f_small, view.news, width, 2):
            line(ln, self.f_small)
        remembering = self.replay.remembering_at(view.news, state.tick)
        line(f"known by {len(knowing)} of {n_agents} at {state.clock}, still remembered by {len(remembering)}",
             self.f_bold)
        # the legend
        lx = x
        for how, label in (("held", "from the start"), ("seen", "saw it"), ("heard", "heard it"), ("told", "told"),
                           (None, "does not know")):
            pygame.draw.circle(surface, KNOW_COLOURS[how], (lx + 6, pos[0] + 8), 6)
            img = self.text(self.f_small, label, PANEL_MUTED)
            surface.blit(img, (lx + 16, pos[0] + 1))
            lx += img.get_width() + 24
        pos[0] += 22
        line("faded: knew it and holds no memory of it now", self.f_small, PANEL_MUTED)
        pos[0] = self._diffusion(surface, view.news, state, x, pos[0], width)
        order = sorted(knowing.values(), key=lambda w: (w.tick, self.replay.names.get(w.agent, w.agent)))
        for w in order:
            if pos[0] + 20 > self.panel_rect.bottom - 10:
                line(f"... {len(order) - order.index(w)} more", self.f_small, PANEL_MUTED)
                break
            forgot = self._forgot.get(w.agent)
            colour = KNOW_COLOURS[w.how]
            pygame.draw.circle(surface, faded(colour) if forgot is not None else colour, (x + 6, pos[0] + 8), 5)
            said = self._learned(w) + ("" if forgot is None else "; " + self._forgotten(forgot, state))
            text = _fit(self.f_small, f"{self.replay.names.get(w.agent, w.agent)}: {said}", width - 18)
            rect = pygame.Rect(x - 4, pos[0], width + 8, 18)
            self.hotspots.append((rect, ("agent", w.agent)))
            line(text, self.f_small, PANEL_TEXT, indent=16)

    def _diffusion(self, surface: pygame.Surface, topic: str, state: TickState, x: int, y: int, width: int) -> int:
        """The number knowing ``topic`` tick by tick and, beside it, the number still holding a memory of it, two
        small curves with the current tick marked; returns the next y."""
        h = 60
        counts = self.replay.diffusion(topic)
        held = self.replay.remembered(topic)
        n = max(1, len(self.replay.agents))
        label = (f"knew {counts[-1] if counts else 0}/{n} (orange), remember {held[-1] if held else 0}/{n} "
                 f"(white) by {self.replay.state_at(self.replay.last_tick).clock}")
        surface.blit(self.text(self.f_small, label, PANEL_MUTED), (x, y))
        self.panel_lines.append(label)
        box = pygame.Rect(x, y + 18, width, h)
        pygame.draw.rect(surface, (30, 33, 42), box, border_radius=4)
        if len(counts) > 1:
            def curve(values: list[int]) -> list[tuple[float, float]]:
                return [(box.x + 4 + (box.width - 8) * i / (len(values) - 1), box.bottom - 4 - (h - 8) * c / n)
                        for i, c in enumerate(values)]

            pygame.draw.lines(surface, REMEMBERED_CURVE, False, curve(held), 1)
            pts = curve(counts)
            pygame.draw.lines(surface, KNOW_COLOURS["heard"], False, pts, 2)
            i = self.replay.index_of(state.tick)
            cx = pts[i][0]
            pygame.draw.line(surface, SELECTED, (cx, box.y + 2), (cx, box.bottom - 2), 1)
            pygame.draw.circle(surface, SELECTED, (round(pts[i][0]), round(pts[i][1])), 4)
        return box.bottom + 8


def render_tick(replay: ReplayState, tick: int, selected: str | None = None,
                size: tuple[int, int] = (1280, 800), view: View | None = None
                ) -> tuple[pygame.Surface, Renderer]:
    """Draw ``tick`` on a new off-screen Surface (no window, no display needed); returns it and the renderer that
    drew it."""
    pygame.font.init()
    renderer = Renderer(replay, size)
    surface = pygame.Surface(size)
    if selected is None:
        selected = replay.agents[0]
    renderer.draw(surface, replay.state_at(tick), selected, overlay=Overlay(paused=True), view=view)
    return surface, renderer
