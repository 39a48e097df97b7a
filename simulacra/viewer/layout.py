"""The viewer's geometry, without pygame: the map's camera (zoom and pan), where agents sit (rings around their
place, or one counted group when a place is crowded), what a point on the screen hits, and the timeline's mapping
between ticks and pixels.

Screen coordinates are pixels (x right, y down); world coordinates are the world file's place ``position`` units.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from simulacra.clock import day_number

#: radius of an agent's marker, pixels
MARKER_RADIUS = 12
#: a place with more agents than this (and not expanded) shows them as one counted group
GROUP_OVER = 8
#: zoom limits (1 = the whole town fits the map area)
MIN_ZOOM, MAX_ZOOM = 0.5, 12.0

Point = tuple[float, float]
Rect = tuple[float, float, float, float]  # x, y, width, height


def _inside(p: Point, r: Rect) -> bool:
    return r[0] <= p[0] < r[0] + r[2] and r[1] <= p[1] < r[1] + r[3]


@dataclass
class Camera:
    """Maps world coordinates into the map area ``area`` (x, y, width, height pixels): at zoom 1 the bounding box
    of ``points`` fits the area inside ``margin`` pixels; ``zoom`` (:data:`MIN_ZOOM`..:data:`MAX_ZOOM`) scales about
    the area's centre, ``pan`` shifts in pixels."""

    area: Rect
    points: Sequence[Point]
    margin: tuple[float, float] = (90.0, 70.0)
    zoom: float = 1.0
    pan: Point = (0.0, 0.0)
    _base: tuple[float, float, float, float, float] = field(default=(1.0, 0.0, 0.0, 0.0, 0.0), repr=False)

    def __post_init__(self) -> None:
        xs = [p[0] for p in self.points] or [0.0]
        ys = [p[1] for p in self.points] or [0.0]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        w = max(1.0, self.area[2] - 2 * self.margin[0])
        h = max(1.0, self.area[3] - 2 * self.margin[1])
        scale = min(w / max(x1 - x0, 1e-9), h / max(y1 - y0, 1e-9))
        ox = self.area[0] + self.margin[0] + (w - (x1 - x0) * scale) / 2
        oy = self.area[1] + self.margin[1] + (h - (y1 - y0) * scale) / 2
        self._base = (scale, ox, oy, x0, y0)

    @property
    def centre(self) -> Point:
        return self.area[0] + self.area[2] / 2, self.area[1] + self.area[3] / 2

    def to_screen(self, p: Point) -> Point:
        """World point -> screen pixel."""
        scale, ox, oy, x0, y0 = self._base
        bx, by = ox + (p[0] - x0) * scale, oy + (p[1] - y0) * scale
        cx, cy = self.centre
        return cx + (bx - cx) * self.zoom + self.pan[0], cy + (by - cy) * self.zoom + self.pan[1]

    def to_world(self, q: Point) -> Point:
        """Screen pixel -> world point (the inverse of :meth:`to_screen`)."""
        scale, ox, oy, x0, y0 = self._base
        cx, cy = self.centre
        bx = cx + (q[0] - self.pan[0] - cx) / self.zoom
        by = cy + (q[1] - self.pan[1] - cy) / self.zoom
        return x0 + (bx - ox) / scale, y0 + (by - oy) / scale

    def zoom_at(self, q: Point, factor: float) -> None:
        """Zoom by ``factor`` (clamped to the limits) keeping the world point under screen pixel ``q`` there."""
        before = self.to_world(q)
        self.zoom = max(MIN_ZOOM, min(MAX_ZOOM, self.zoom * factor))
        after = self.to_screen(before)
        self.pan = (self.pan[0] + q[0] - after[0], self.pan[1] + q[1] - after[1])

    def move(self, dx: float, dy: float) -> None:
        """Pan by ``(dx, dy)`` pixels."""
        self.pan = (self.pan[0] + dx, self.pan[1] + dy)

    def reset(self) -> None:
        self.zoom, self.pan = 1.0, (0.0, 0.0)

    @property
    def key(self) -> tuple[float, float, float]:
        """What the drawn map depends on: ``(zoom, pan x, pan y)``."""
        return self.zoom, self.pan[0], self.pan[1]


def ring_radius(n: int) -> float:
    """Radius (pixels) of the ring of ``n`` markers around a place (0 for one agent alone)."""
    if n <= 1:
        return 0.0
    return max(MARKER_RADIUS * 1.6, (2 * MARKER_RADIUS + 4) / (2 * math.sin(math.pi / n)))  # neighbours 4 px apart


def group_radius(n: int) -> float:
    """Radius (pixels) of a counted group's disc of ``n`` agents: grows with the count's logarithm."""
    return MARKER_RADIUS + 4 + 4 * math.log10(max(1, n))


@dataclass(frozen=True)
class Group:
    """A crowded place's agents drawn as one disc of ``radius`` pixels at ``centre`` with their count."""

    place: str
    centre: Point
    radius: float
    agents: tuple[str, ...]


@dataclass(frozen=True)
class Placement:
    """Where a tick's agents are drawn: ``markers`` (agent -> centre, pixels; agents in a group have none),
    ``groups`` and, per place, the radius (pixels) its agents take around it (``reach``)."""

    markers: dict[str, Point]
    groups: dict[str, Group]
    reach: dict[str, float]


def label_order(places: Mapping[str, Mapping], destinations: Iterable[str] = ()) -> list[str]:
    """The order in which the places' names are put on the map, where a name that would overlap one already placed
    is left out: places residents go to (``destinations``: homes and routine steps) before places they only pass
    through (an imported town's streets), then public places, other places, homes; ties keep the given order.

    Args:
        places: place id -> a mapping with ``kind`` (``"home"``, ``"public"``, ...), in the world file's order.
        destinations: the ids of the places residents go to; none given: every place counts as one.
    Returns:
        the place ids, every one once.
    """
    goes = set(destinations)

    def key(pid: str) -> tuple[bool, bool, bool]:
        kind = places[pid].get("kind")
        return bool(goes) and pid not in goes, kind == "home", kind != "public"

    return sorted(places, key=key)


def nearest_distances(points: Mapping[str, Point]) -> dict[str, float]:
    """Per point, the distance to its nearest other point (same units; ``inf`` when alone)."""
    ids = list(points)
    out = {i: math.inf for i in ids}
    for a in range(len(ids)):
        xa, ya = points[ids[a]]
        for b in range(a + 1, len(ids)):
            xb, yb = points[ids[b]]
            d = math.hypot(xa - xb, ya - yb)
            if d < out[ids[a]]:
                out[ids[a]] = d
            if d < out[ids[b]]:
                out[ids[b]] = d
    return out


def capacity(spacing: float) -> int:
    """How many markers fit around a place whose nearest neighbour is ``spacing`` pixels away without reaching
    half way to it (at least 1): past it, the place's agents are one counted group until zoomed in or expanded."""
    n = 1
    while n < 64 and ring_radius(n + 1) + MARKER_RADIUS + 2 <= spacing / 2:
        n += 1
    return n


def place_agents(at: Mapping[str, Sequence[str]], place_xy: Mapping[str, Point], expanded: Iterable[str] = (),
                 group_over: int = GROUP_OVER, default: Point = (0.0, 0.0),
                 room: Mapping[str, int] | None = None, spacing: Mapping[str, float] | None = None) -> Placement:
    """Place each agent: alone at its place on it, several on a ring around it; more than ``group_over`` at a place
    (or more than its ``room``) not in ``expanded``: one :class:`Group`.

    Args:
        at: place id -> the agents there (in the order to draw them).
        place_xy: place id -> its screen centre (pixels); a place missing from it sits at ``default``.
        expanded: places whose crowd is drawn agent by agent however many there are.
        room: place id -> how many markers fit around it at this zoom (:func:`capacity`); default: no limit.
        spacing: place id -> pixels to its nearest neighbour at this zoom: a group's disc stays within half of it
            (at least 6 pixels), so that a dense town's groups do not pile up; default: no limit.
    """
    markers: dict[str, Point] = {}
    groups: dict[str, Group] = {}
    reach: dict[str, float] = {}
    open_places = set(expanded)
    for place, pids in at.items():
        cx, cy = place_xy.get(place, default)
        n = len(pids)
        limit = group_over if room is None else min(group_over, room.get(place, group_over))
        if n > limit and place not in open_places:
            r = group_radius(n)
            if spacing is not None and place in spacing:
                r = max(6.0, min(r, spacing[place] / 2 - 1))
            groups[place] = Group(place, (cx, cy), r, tuple(pids))
            reach[place] = r
            continue
        ring = ring_radius(n)
        if n > 24:  # a large expanded crowd: concentric rings of 24
            for i, pid in enumerate(pids):
                k, j = divmod(i, 24)
                rr = ring_radius(24) + k * (2 * MARKER_RADIUS + 4)
                a = -math.pi / 2 + 2 * math.pi * j / 24 + (k % 2) * math.pi / 24
                markers[pid] = (cx + rr * math.cos(a), cy + rr * math.sin(a))
            reach[place] = ring_radius(24) + ((n - 1) // 24) * (2 * MARKER_RADIUS + 4) + MARKER_RADIUS
            continue
        for i, pid in enumerate(pids):
            a = -math.pi / 2 + 2 * math.pi * i / n
            markers[pid] = (cx + ring * math.cos(a), cy + ring * math.sin(a))
        reach[place] = ring + MARKER_RADIUS
    return Placement(markers, groups, reach)


@dataclass(frozen=True)
class Hit:
    """What a screen point hits: ``kind`` ``agent`` / ``group`` / ``place`` and the id (agent or place)."""

    kind: str
    id: str


def hit_test(point: Point, markers: Mapping[str, Point], groups: Mapping[str, Group],
             places: Mapping[str, Rect], marker_radius: float = MARKER_RADIUS + 2) -> Hit | None:
    """The agent, group or place under ``point``: an agent marker first (the nearest whose disc holds the point),
    then a group's disc, then a place's rectangle (its square or its label); ``None``: empty map."""
    best, best_d = None, marker_radius ** 2
    for pid, (x, y) in markers.items():
        d = (x - point[0]) ** 2 + (y - point[1]) ** 2
        if d <= best_d:
            best, best_d = pid, d
    if best is not None:
        return Hit("agent", best)
    for place, g in groups.items():
        if (g.centre[0] - point[0]) ** 2 + (g.centre[1] - point[1]) ** 2 <= g.radius ** 2:
            return Hit("group", place)
    for place, rect in places.items():
        if _inside(point, rect):
            return Hit("place", place)
    return None


@dataclass(frozen=True)
class Timeline:
    """The timeline's mapping: ticks ``first``..``last`` spread over ``x``..``x + width`` pixels (each tick a slot
    of ``width / ticks`` pixels; a tick's centre is the middle of its slot)."""

    first: int
    last: int
    x: float
    width: float

    @property
    def slot(self) -> float:
        return self.width / max(1, self.last - self.first + 1)

    def x_of(self, tick: int) -> float:
        """Centre pixel of ``tick``'s slot (clamped to the run)."""
        t = max(self.first, min(self.last, tick))
        return self.x + (t - self.first + 0.5) * self.slot

    def tick_at(self, x: float) -> int:
        """The tick whose slot holds pixel ``x`` (clamped: left of the bar is the first tick, right the last)."""
        return max(self.first, min(self.last, self.first + int(math.floor((x - self.x) / self.slot))))


def day_spans(times: Sequence[int], first: int) -> list[tuple[int, int, int]]:
    """``(day, first tick, last tick)`` of each game day in a replay whose ticks start at game minutes ``times``
    (the ticks numbered from ``first``); day 1 starts at minute 0."""
    out: list[tuple[int, int, int]] = []
    for i, t in enumerate(times):
        day = day_number(t)
        if out and out[-1][0] == day:
            out[-1] = (day, out[-1][1], first + i)
        else:
            out.append((day, first + i, first + i))
    return out


#: every key and mouse action of the window: the help overlay (H) and docs/viewer.md show this list
HELP_LINES = [
    ("space", "pause / play"),
    ("right / left", "step one tick forward / back"),
    ("Home / End", "first / last tick"),
    ("123 Enter", "go to tick 123 (or 123 G)"),
    ("+ / -", "faster / slower"),
    ("Tab / shift Tab", "select the next / previous agent"),
    ("I, M, P, N", "panel: agent info, memories, place, news (who knows, who remembers)"),
    ("/", "memories: type to search (Enter / Esc ends)"),
    ("Page Up / Down", "scroll the panel"),
    ("R", "relationships: who talked with whom"),
    ("B", "speech bubbles on / off"),
    ("[ / ], C", "zoom out / in, centre the map"),
    ("E", "expand / collapse every crowd"),
    ("S", "save a screenshot (PNG)"),
    ("H", "show / hide this help"),
    ("Esc / Q", "quit (Esc first leaves the search)"),
    ("click agent", "select it (the panel follows it)"),
    ("click place", "who is there, what they do, its objects"),
    ("click crowd", "expand the counted group (again: fold)"),
    ("click panel", "tabs, filters, a memory, a news, an agent"),
    ("click / drag timeline", "go to that moment"),
    ("drag the map", "pan it"),
    ("wheel on the map", "zoom (ctrl + wheel: zoom from anywhere)"),
    ("wheel", "scroll the panel under the mouse"),
    ("hover", "tooltip for an agent, crowd, place, tick"),
]


#: the side panel's views
PANELS = ("agent", "memory", "place", "news")


@dataclass
class View:
    """What the window shows besides the tick (the player's choices; no pygame).

    Attributes:
        panel: the side panel's view, one of :data:`PANELS`.
        place: the place whose panel is open (clicked), or ``None``.
        news: the topic of the news picked in the who-knows-what view, or ``None``.
        relations: draw who talked with whom up to the tick.
        bubbles: draw speech bubbles.
        expanded: places whose crowd is drawn agent by agent.
        tiers: the memory browser's tiers shown.
        kinds: the memory browser's kinds shown (``None``: every kind).
        search: the memory browser's search text; ``searching``: keys go to it.
        memory: the id of the memory selected in the browser, or ``None``.
        scroll: per panel, how far its list is scrolled (rows).
        hover: the mouse position (pixels), or ``None``.
    """

    panel: str = "agent"
    place: str | None = None
    news: str | None = None
    relations: bool = False
    bubbles: bool = True
    expanded: set[str] = field(default_factory=set)
    tiers: set[str] = field(default_factory=lambda: {"static", "short_term", "long_term", "shared"})
    kinds: set[str] | None = None
    search: str = ""
    searching: bool = False
    memory: str | None = None
    scroll: dict[str, int] = field(default_factory=dict)
    hover: Point | None = None

    def scroll_by(self, panel: str, rows: int, limit: int | None = None) -> None:
        """Scroll ``panel``'s list by ``rows`` (negative: up), staying in 0..``limit``."""
        v = max(0, self.scroll.get(panel, 0) + rows)
        self.scroll[panel] = v if limit is None else min(v, max(0, limit))
