"""Drawing a :class:`~simulacra.viewer.state.TickState` on a pygame Surface.

The :class:`Renderer` draws the map (places from the world's ``position`` [x, y], paths, labels), the agents
as coloured markers with initials (several agents at one place sit on a small ring around it), speech bubbles
for the tick's conversation lines, the game clock, and a side panel for the selected agent: place, action,
memory counts per tier and the last retrieval with recency / importance / relevance bars and the score.
After :meth:`Renderer.draw` it exposes what it drew (``markers``, ``place_xy``, ``panel_lines``,
``bubble_lines``) so tests and click handling need not read pixels.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


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

from simulacra.viewer.state import TIERS, ReplayState, TickState  # noqa: E402, ReplayState, TickState

BACKGROUND = (236, 230, 212)
MAP_EDGE = (200, 190, 165)
PATH = (168, 150, 120)
TEXT = (40, 36, 30)
MUTED = (110, 102, 90)
PANEL_BG = (38, 42, 52)
PANEL_TEXT = (232, 232, 236)
PANEL_MUTED = (160, 166, 180)
TOPBAR = (52, 58, 70)
BUBBLE = (255, 255, 250)
PLACE_FILL = {"home": (214, 190, 160), "shop": (232, 206, 128), "public": (182, 204, 226),
              "nature": (172, 212, 160), "work": (196, 196, 214)}
PLACE_OTHER = (205, 205, 205)
TIER_LABEL = {"static": "static", "short_term": "short-term", "long_term": "long-term"}
BAR_COLOURS = {"rec": (96, 170, 230), "imp": (240, 170, 60), "rel": (120, 200, 120)}
#: distinct marker colours, one per agent in the header's order (cycled past 12)
PALETTE = [(220, 50, 47), (38, 139, 210), (40, 160, 60), (211, 54, 130), (181, 137, 0), (108, 113, 196),
           (203, 75, 22), (42, 161, 152), (130, 60, 160), (90, 90, 90), (230, 120, 170), (20, 90, 60)]
MARKER_RADIUS = 12


@dataclass
class Overlay:
    """Playback status drawn over the frame: pause, speed, the number being typed, the help box."""

    paused: bool = False
    speed: float = 1.0
    seek_text: str | None = None
    help: bool = False
    message: str = ""


HELP_LINES = [
    "space         pause / play",
    "right / left  step one tick forward / back",
    "Home / End    first / last tick",
    "123 Enter     go to tick 123 (or 123 G)",
    "+ / -         faster / slower",
    "Tab           select the next agent (or click one)",
    "S             save a screenshot (PNG)",
    "H             show / hide this help",
    "Esc / Q       quit",
]


def _font(size: int, bold: bool = False) -> pygame.font.Font:
    if not pygame.font.get_init():
        pygame.font.init()
    f = pygame.font.Font(None, size)  # pygame's bundled font: the same pixels on every machine
    f.set_bold(bold)
    return f


def _lerp(a: tuple[float, float], b: tuple[float, float], t: float) -> tuple[float, float]:
    return a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t


def _fit(font: pygame.font.Font, text: str, width: int) -> str:
    """``text`` cut with "..." to fit ``width`` pixels."""
    if font.size(text)[0] <= width:
        return text
    while text and font.size(text + "...")[0] > width:
        text = text[:-1]
    return text.rstrip() + "..."


def wrap(font: pygame.font.Font, text: str, width: int, max_lines: int) -> list[str]:
    """Word-wrap ``text`` to ``width`` pixels, at most ``max_lines`` lines (the last one cut with "...")."""
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
            return lines
    if current:
        lines.append(_fit(font, current, width))
    if len(lines) > max_lines:
        lines = lines[:max_lines - 1] + [_fit(font, " ".join(lines[max_lines - 1:]), width)]
    return lines


class Renderer:
    """Draws replay frames of one run at a fixed surface size.

    Args:
        replay: the run (places, paths, agents, names).
        size: (width, height) of the surface in pixels; the side panel takes ``panel_width`` on the right.

    After :meth:`draw`: ``markers`` (agent id -> marker centre, pixels), ``place_xy`` (place id -> centre),
    ``colours`` (agent id -> RGB), ``panel_lines`` (the panel's text, top to bottom), ``bubble_lines``.
    """

    def __init__(self, replay: ReplayState, size: tuple[int, int] = (1280, 800), panel_width: int = 440):
        self.replay = replay
        self.size = size
        self.panel_width = panel_width
        self.top = 40
        self.map_rect = pygame.Rect(0, self.top, size[0] - panel_width, size[1] - self.top)
        self.panel_rect = pygame.Rect(size[0] - panel_width, 0, panel_width, size[1])
        self.colours = {pid: PALETTE[i % len(PALETTE)] for i, pid in enumerate(replay.agents)}
        self.f_small, self.f_text = _font(18), _font(21)
        self.f_bold, self.f_title = _font(21, bold=True), _font(28, bold=True)
        self.f_marker = _font(18, bold=True)
        self.place_xy = self._layout()
        self.markers: dict[str, tuple[int, int]] = {}
        self.panel_lines: list[str] = []
        self.bubble_lines: list[str] = []

    # ----------------------------------------------------------------- layout
    def _layout(self) -> dict[str, tuple[int, int]]:
        """Place ids -> screen centres: the world's coordinates scaled uniformly into the map area."""
        pos = {pid: p["position"] for pid, p in self.replay.places.items()}
        xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
        x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
        margin_x, margin_y = 90, 70
        w = max(1, self.map_rect.width - 2 * margin_x)
        h = max(1, self.map_rect.height - 2 * margin_y)
        scale = min(w / max(x1 - x0, 1e-9), h / max(y1 - y0, 1e-9))
        ox = self.map_rect.x + margin_x + (w - (x1 - x0) * scale) / 2
        oy = self.map_rect.y + margin_y + (h - (y1 - y0) * scale) / 2
        return {pid: (round(ox + (x - x0) * scale), round(oy + (y - y0) * scale)) for pid, (x, y) in pos.items()}

    @staticmethod
    def ring_radius(n: int) -> float:
        """Radius of the ring of ``n`` markers around a place (0 for one agent alone)."""
        return 0.0 if n <= 1 else max(MARKER_RADIUS * 1.6, (2 * MARKER_RADIUS + 4) * n / (2 * math.pi))

    def crowd(self, state: TickState) -> dict[str, int]:
        """Place id -> number of agents there at ``state``."""
        out: dict[str, int] = {}
        for a in state.agents.values():
            out[a.place] = out.get(a.place, 0) + 1
        return out

    def slots(self, state: TickState) -> dict[str, tuple[float, float]]:
        """Marker centre of each agent at ``state``: alone at a place, on it; several, on a ring around it."""
        at: dict[str, list[str]] = {}
        for pid in self.replay.agents:
            at.setdefault(state.agents[pid].place, []).append(pid)
        out = {}
        for place, pids in at.items():
            cx, cy = self.place_xy.get(place, self.map_rect.center)
            n = len(pids)
            ring = self.ring_radius(n)
            for i, pid in enumerate(pids):
                a = -math.pi / 2 + 2 * math.pi * i / n
                out[pid] = (cx + ring * math.cos(a), cy + ring * math.sin(a))
        return out

    def agent_at(self, point: tuple[int, int]) -> str | None:
        """The agent whose marker (as last drawn) contains ``point``, nearest first; ``None`` if none."""
        best, best_d = None, (MARKER_RADIUS + 2) ** 2
        for pid, (x, y) in self.markers.items():
            d = (x - point[0]) ** 2 + (y - point[1]) ** 2
            if d <= best_d:
                best, best_d = pid, d
        return best

    # ----------------------------------------------------------------- drawing
    def draw(self, surface: pygame.Surface, state: TickState, selected: str | None = None,
             next_state: TickState | None = None, frac: float = 0.0, overlay: Overlay | None = None) -> None:
        """Draw ``state`` (agents moved ``frac`` of the way, 0..1, towards ``next_state``) on ``surface``."""
        surface.fill(BACKGROUND)
        crowd = self.crowd(state)
        self._draw_map(surface, crowd)
        a = self.slots(state)
        b = self.slots(next_state) if next_state is not None else a
        t = max(0.0, min(1.0, frac))
        t = t * t * (3 - 2 * t)  # smoothstep: ease in and out of each walk
        self.markers = {pid: tuple(round(v) for v in _lerp(a[pid], b[pid], t)) for pid in self.replay.agents}
        self._draw_bubbles(surface, state, crowd)
        self._draw_agents(surface, selected)
        self._draw_events(surface, state)
        self._draw_topbar(surface, state, overlay or Overlay())
        self._draw_panel(surface, state, selected)
        if overlay is not None and overlay.help:
            self._draw_help(surface)

    def _draw_map(self, surface: pygame.Surface, crowd: dict[str, int]) -> None:
        pygame.draw.rect(surface, MAP_EDGE, self.map_rect.inflate(-16, -16), width=2, border_radius=10)
        for p, q in self.replay.paths:
            if p in self.place_xy and q in self.place_xy:
                pygame.draw.line(surface, PATH, self.place_xy[p], self.place_xy[q], 5)
        for pid, (x, y) in self.place_xy.items():
            place = self.replay.places[pid]
            rect = pygame.Rect(0, 0, 34, 34)
            rect.center = (x, y)
            pygame.draw.rect(surface, PLACE_FILL.get(place["kind"], PLACE_OTHER), rect, border_radius=7)
            pygame.draw.rect(surface, MUTED, rect, width=1, border_radius=7)
            label = self.f_small.render(place["name"], True, TEXT)
            below = max(20, self.ring_radius(crowd.get(pid, 0)) + MARKER_RADIUS + 4)
            lr = label.get_rect(midtop=(x, y + below))
            lr.clamp_ip(self.map_rect)
            surface.blit(label, lr)

    def _draw_agents(self, surface: pygame.Surface, selected: str | None) -> None:
        for pid in self.replay.agents:
            x, y = self.markers[pid]
            colour = self.colours[pid]
            if pid == selected:
                pygame.draw.circle(surface, (255, 215, 0), (x, y), MARKER_RADIUS + 5)
            pygame.draw.circle(surface, (255, 255, 255), (x, y), MARKER_RADIUS + 2)
            pygame.draw.circle(surface, colour, (x, y), MARKER_RADIUS)
            lum = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
            text = self.f_marker.render(self.replay.initials[pid], True, (0, 0, 0) if lum > 160 else (255, 255, 255))
            surface.blit(text, text.get_rect(center=(x, y + 1)))

    def _draw_bubbles(self, surface: pygame.Surface, state: TickState, crowd: dict[str, int]) -> None:
        """One bubble per conversation, above its place: "XY: what was said", one line per turn."""
        self.bubble_lines = []
        convs: dict[tuple[str, frozenset], list] = {}
        for u in state.utterances:
            convs.setdefault((u.place, frozenset((u.speaker, u.listener))), []).append(u)
        placed: list[pygame.Rect] = []  # marker rings, then bubbles: what a new bubble must not cover
        for place, n in crowd.items():
            reach = int(self.ring_radius(n) + MARKER_RADIUS + 3)
            ring = pygame.Rect(0, 0, 2 * reach, 2 * reach)
            ring.center = self.place_xy.get(place, self.map_rect.center)
            placed.append(ring)
        width = 300
        for (place, _), lines in convs.items():
            text_lines: list[tuple[str, tuple[int, int, int]]] = []
            for u in lines[:4]:
                for i, ln in enumerate(wrap(self.f_small, f"{self.replay.initials[u.speaker]}: {u.text}", width, 2)):
                    text_lines.append(("    " + ln if i else ln, self.colours[u.speaker]))
                    self.bubble_lines.append(ln)
            if len(lines) > 4:
                text_lines.append((f"... {len(lines) - 4} more lines", MUTED))
            lh = self.f_small.get_linesize()
            rect = pygame.Rect(0, 0, max(self.f_small.size(t)[0] for t, _ in text_lines) + 16,
                               lh * len(text_lines) + 12)
            cx, cy = self.place_xy.get(place, self.map_rect.center)
            reach = self.ring_radius(crowd.get(place, 0)) + MARKER_RADIUS + 12
            self._place_bubble(rect, (cx, cy), reach, placed)
            placed.append(rect)
            base_y = rect.bottom - 1 if rect.bottom <= cy else rect.top + 1
            tip_y = base_y + 10 if rect.bottom <= cy else base_y - 10
            tip_x = max(rect.left + 10, min(rect.right - 10, cx))
            pygame.draw.polygon(surface, BUBBLE, [(tip_x - 7, base_y), (tip_x + 7, base_y), (tip_x, tip_y)])
            pygame.draw.rect(surface, BUBBLE, rect, border_radius=8)
            pygame.draw.rect(surface, MUTED, rect, width=1, border_radius=8)
            for i, (t, colour) in enumerate(text_lines):
                speaker_part, sep, rest = t.partition(": ")
                x, y = rect.x + 8, rect.y + 6 + i * lh
                if sep and not t.startswith(" "):
                    img = self.f_small.render(speaker_part + sep, True, colour)
                    surface.blit(img, (x, y))
                    x += img.get_width()
                    t = rest
                surface.blit(self.f_small.render(t, True, TEXT), (x, y))

    def _place_bubble(self, rect: pygame.Rect, centre: tuple[int, int], reach: float,
                      placed: list[pygame.Rect]) -> None:
        """Move ``rect`` next to ``centre`` (above it, else below, else the least crowded spot), clear of
        ``placed`` bubbles and of the marker rings, inside the map."""
        area = self.map_rect.inflate(-20, -20)
        cx, cy = centre
        candidates = []
        for k in range(14):
            for dx in (0, -rect.width // 2 - 20, rect.width // 2 + 20):
                candidates.append((cx + dx, cy - reach - k * 22, "above"))
                candidates.append((cx + dx, cy + reach + k * 22, "below"))
        best = None
        for x, y, side in candidates:
            r = rect.copy()
            if side == "above":
                r.midbottom = (x, int(y))
            else:
                r.midtop = (x, int(y))
            r.clamp_ip(area)
            if side == "above" and r.bottom > cy - reach + 1 or side == "below" and r.top < cy + reach - 1:
                continue  # clamping pushed it onto its own place
            overlap = sum(r.clip(o).width * r.clip(o).height for o in placed)
            if overlap == 0:
                rect.topleft = r.topleft
                return
            if best is None or overlap < best[0]:
                best = (overlap, r.topleft)
        if best is not None:
            rect.topleft = best[1]
        else:
            rect.midbottom = (cx, int(cy - reach))
            rect.clamp_ip(area)

    def _draw_events(self, surface: pygame.Surface, state: TickState) -> None:
        y = self.map_rect.bottom - 14
        for ev in reversed(state.events[-2:]):
            img = self.f_small.render(_fit(self.f_small, f"event: {ev}", self.map_rect.width - 40), True, (150, 40, 30))
            y -= img.get_height() + 2
            surface.blit(img, (self.map_rect.x + 20, y))

    def _draw_topbar(self, surface: pygame.Surface, state: TickState, overlay: Overlay) -> None:
        bar = pygame.Rect(0, 0, self.map_rect.width, self.top)
        pygame.draw.rect(surface, TOPBAR, bar)
        r = self.replay
        clock = self.f_title.render(state.when or state.clock, True, (255, 255, 255))
        surface.blit(clock, (12, (self.top - clock.get_height()) // 2))
        status = "paused" if overlay.paused else f"playing x{overlay.speed:g}"
        info = f"{r.world_name}   tick {state.tick} / {r.last_tick}   {status}"
        if overlay.seek_text is not None:
            info += f"   go to tick: {overlay.seek_text}_"
        if overlay.message:
            info += f"   {overlay.message}"
        img = self.f_text.render(_fit(self.f_text, info, bar.width - clock.get_width() - 60), True, PANEL_TEXT)
        surface.blit(img, (clock.get_width() + 30, (self.top - img.get_height()) // 2))
        hint = self.f_small.render("H: help", True, PANEL_MUTED)
        surface.blit(hint, hint.get_rect(midright=(bar.right - 10, self.top // 2)))

    def _draw_panel(self, surface: pygame.Surface, state: TickState, selected: str | None) -> None:
        pygame.draw.rect(surface, PANEL_BG, self.panel_rect)
        self.panel_lines = []
        x, y = self.panel_rect.x + 16, 14
        width = self.panel_rect.width - 32
        bottom = self.panel_rect.bottom - 10

        def line(text: str, font=None, colour=PANEL_TEXT, indent: int = 0, gap: int = 0) -> None:
            nonlocal y
            font = font or self.f_text
            self.panel_lines.append(text)
            if y + font.get_linesize() <= bottom:
                surface.blit(font.render(text, True, colour), (x + indent, y))
            y += font.get_linesize() + gap

        if selected is None or selected not in state.agents:
            line("Click an agent or press Tab", self.f_bold)
            return
        a = state.agents[selected]
        pygame.draw.circle(surface, self.colours[selected], (x + 12, y + 13), 12)
        name = self.f_title.render(a.name, True, PANEL_TEXT)
        surface.blit(name, (x + 32, y))
        self.panel_lines.append(a.name)
        y += name.get_height() + 8
        line(f"at {a.place_name}", colour=PANEL_MUTED)
        for ln in wrap(self.f_text, f"{'asleep' if a.asleep else a.action_type}: {a.activity}", width, 2):
            line(ln)
        y += 4
        counts = "   ".join(f"{TIER_LABEL[t]} {'?' if a.counts.get(t) is None else a.counts[t]}" for t in TIERS)
        line("memories: " + counts, self.f_small, PANEL_MUTED, gap=8)
        if a.plan:
            line(f"plan for the day ({a.plan_source})", self.f_bold)
            for item in a.plan[:6]:
                for ln in wrap(self.f_small, item, width, 1):
                    line(ln, self.f_small, PANEL_MUTED)
            y += 6
        r = a.last_retrieval
        if r is None:
            line("no retrieval yet", self.f_bold)
            return
        line(f"last retrieval (tick {r.tick}, {r.purpose})", self.f_bold)
        for ln in wrap(self.f_small, f"query: {r.query}", width, 2):
            line(ln, self.f_small, PANEL_MUTED)
        y += 6
        if not r.results:
            line("nothing above the threshold", self.f_small, PANEL_MUTED)
        for i, m in enumerate(r.results):
            if y + 90 > bottom:
                line(f"... {len(r.results) - i} more", self.f_small, PANEL_MUTED)
                break
            pygame.draw.line(surface, (70, 76, 90), (x, y - 3), (x + width, y - 3))
            for ln in wrap(self.f_small, m.text, width, 2):
                line(ln, self.f_small)
            line(f"{TIER_LABEL.get(m.tier, m.tier)} {m.kind}   score {m.score:.3f}", self.f_small, PANEL_MUTED)
            bar_w = (width - 12) // 3
            for j, (key, value) in enumerate((("rec", m.recency), ("imp", m.importance), ("rel", m.relevance))):
                bx = x + j * (bar_w + 6)
                label = f"{key} {'-' if value is None else f'{value:.2f}'}"
                self.panel_lines.append(label)
                box = pygame.Rect(bx, y, bar_w, 16)
                pygame.draw.rect(surface, (60, 66, 80), box, border_radius=3)
                if value is not None:
                    fill = box.copy()
                    fill.width = max(1, round(bar_w * max(0.0, min(1.0, value))))
                    pygame.draw.rect(surface, BAR_COLOURS[key], fill, border_radius=3)
                img = self.f_small.render(label, True, (255, 255, 255) if value is None else (20, 20, 20))
                surface.blit(img, (bx + 4, y + 1))
            y += 26

    def _draw_help(self, surface: pygame.Surface) -> None:
        lh = self.f_text.get_linesize()
        box = pygame.Rect(0, 0, 470, lh * (len(HELP_LINES) + 2) + 20)
        box.center = self.map_rect.center
        shade = pygame.Surface(box.size, pygame.SRCALPHA)
        shade.fill((20, 22, 28, 225))
        surface.blit(shade, box)
        surface.blit(self.f_bold.render("Controls", True, (255, 255, 255)), (box.x + 18, box.y + 12))
        for i, text in enumerate(HELP_LINES):
            surface.blit(self.f_text.render(text, True, PANEL_TEXT), (box.x + 18, box.y + 16 + lh * (i + 1)))


def render_tick(replay: ReplayState, tick: int, selected: str | None = None,
                size: tuple[int, int] = (1280, 800)) -> tuple[pygame.Surface, Renderer]:
    """Draw ``tick`` on a new off-screen Surface (no window, no display needed); returns it and the renderer that
    drew it."""
    pygame.font.init()
    renderer = Renderer(replay, size)
    surface = pygame.Surface(size)
    if selected is None:
        selected = replay.agents[0]
    renderer.draw(surface, replay.state_at(tick), selected, overlay=Overlay(paused=True))
    return surface, renderer
