"""The replay window: a pygame loop over a :class:`~simulacra.viewer.state.ReplayState`.

Playback position is a float tick (``Player.position``): its integer part is the tick shown, its fraction how
far the agents have walked towards the next tick's places. All controls act on :class:`Player`, which has no
pygame in it; :func:`handle_event` turns one pygame event (key, click, drag, wheel, motion) into calls on the
player and the renderer's camera, so tests drive the window by posting real events, without the loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulacra.errors import SimulacraError, is_whole
from simulacra.viewer.layout import PANELS, View
from simulacra.viewer.state import ReplayState

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # ticks per second


@dataclass
class Player:
    """Playback state: position in ticks (float), paused, speed (ticks per second), selected agent."""

    replay: ReplayState
    position: float = 0.0
    paused: bool = False
    speed_index: int = 2
    selected: str | None = None
    seek_text: str | None = None
    help: bool = False
    message: str = ""
    live: bool = False  # following a running simulation: at the last tick, wait for more instead of pausing
    view: View = field(default_factory=View)
    drag: dict[str, Any] | None = None  # a mouse drag in progress: {"what": "map" | "timeline", "start", "last"}
    _agents: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._agents = list(self.replay.agents)
        self.position = float(self.replay.index_of(int(self.position)))
        if self.selected is None and self._agents:
            self.selected = self._agents[0]

    @property
    def speed(self) -> float:
        return SPEEDS[self.speed_index]

    @property
    def index(self) -> int:
        return int(math.floor(self.position))

    @property
    def tick(self) -> int:
        return self.replay.first_tick + self.index

    @property
    def frac(self) -> float:
        return self.position - self.index

    def update(self, dt: float) -> None:
        """Advance ``dt`` seconds of playback; stops (paused) at the last tick."""
        if self.paused:
            return
        last = len(self.replay) - 1
        self.position = min(float(last), self.position + dt * self.speed)
        if self.position >= last and not self.live:
            self.paused = True

    def seek(self, tick: int) -> None:
        """Jump to ``tick`` (clamped), at its place positions (no walk in progress)."""
        self.position = float(self.replay.index_of(tick))

    def step(self, n: int) -> None:
        self.paused = True
        self.seek(self.tick + n)

    def toggle_pause(self) -> None:
        if self.paused and self.index >= len(self.replay) - 1:
            self.position = 0.0  # play again from the start
        self.paused = not self.paused

    def faster(self, n: int = 1) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + n))

    def next_agent(self, n: int = 1) -> None:
        if self._agents:
            i = self._agents.index(self.selected) if self.selected in self._agents else -1
            self.selected = self._agents[(i + n) % len(self._agents)]

    def select(self, agent: str) -> None:
        """Select ``agent`` (the side panel follows it; the memory browser's selected memory is dropped)."""
        if agent != self.selected:
            self.view.memory = None
            self.view.scroll["memory"] = 0
        self.selected = agent
        if self.view.panel == "place":
            self.view.panel = "agent"

    def open_place(self, place: str) -> None:
        """Show ``place`` in the panel: who is there, what they do, its objects."""
        self.view.place = place
        self.view.panel = "place"
        self.view.scroll["place"] = 0

    def show(self, panel: str) -> None:
        """Switch the side panel to ``panel`` (one of :data:`~simulacra.viewer.layout.PANELS`).

        Raises:
            ValueError: not a panel.
        """
        if panel not in PANELS:
            raise ValueError(f"no panel {panel!r}; panels are {', '.join(PANELS)}")
        self.view.panel = panel
        self.view.searching = False

    def toggle_tier(self, tier: str) -> None:
        """Show or hide a tier in the memory browser."""
        self.view.tiers ^= {tier}
        self.view.scroll["memory"] = 0

    def toggle_kind(self, kind: str, kinds: list[str]) -> None:
        """Show or hide a kind of memory in the browser (``kinds``: every kind the agent has)."""
        shown = set(kinds) if self.view.kinds is None else set(self.view.kinds)
        shown ^= {kind}
        self.view.kinds = None if shown >= set(kinds) else shown
        self.view.scroll["memory"] = 0

    def pick_memory(self, memory_id: str) -> None:
        """Select a memory in the browser (again: unselect it)."""
        self.view.memory = None if self.view.memory == memory_id else memory_id

    def pick_news(self, topic: str) -> None:
        """Colour the agents by whether they know ``topic`` (again: stop)."""
        self.view.news = None if self.view.news == topic else topic
        self.view.panel = "news"

    def toggle_group(self, place: str) -> None:
        """Expand a crowded place's counted group into its agents (again: fold it)."""
        self.view.expanded ^= {place}

    def type_digit(self, d: str) -> None:
        self.seek_text = ((self.seek_text or "") + d)[-6:]

    def confirm_seek(self) -> None:
        if self.seek_text:
            self.seek(int(self.seek_text))
            self.paused = True
        self.seek_text = None


def screenshot_name(run_dir: Path, tick: int) -> Path:
    """``<run>/replay-tick<N>.png``, or ``-2``, ``-3``... if taken before."""
    base = run_dir / f"replay-tick{tick:04d}"
    path, n = base.with_suffix(".png"), 2
    while path.exists():
        path, n = Path(f"{base}-{n}.png"), n + 1
    return path


def run_window(replay: ReplayState, run_dir: Path, start_tick: int = 0, selected: str | None = None,
               size: tuple[int, int] = (1280, 800), speed: float = 1.0, fps: int = 30, follow=None,
               is_running=None, close_when_done: bool = False) -> int:
    """Open the replay window and play until it is closed; returns 0.

    Args:
        follow: for a live run, a callable returning the tick records written since its last call
            (:meth:`~simulacra.viewer.state.TraceFollower.poll`); called once per frame, never blocking.
        is_running: for a live run, a callable telling whether the simulation is still running.
        close_when_done: return once the live run has finished and playback reached its last tick.
    """
    from simulacra.viewer.render import Overlay, Renderer, pygame

    pygame.display.init()  # no audio: a replay is silent
    pygame.font.init()
    pygame.display.set_caption(f"simulacra replay - {replay.world_name} ({run_dir})")
    screen = pygame.display.set_mode(size)
    renderer = Renderer(replay, size)
    player = Player(replay, selected=selected)
    player.seek(start_tick)
    player.speed_index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - speed))
    player.live = follow is not None
    clock = pygame.time.Clock()
    running = True
    while running:
        dt = clock.tick(fps) / 1000.0
        for ev in pygame.event.get():
            if not handle_event(ev, player, renderer, screen, run_dir):
                running = False
        if follow is not None:
            new = follow()
            if new:
                replay.extend(new)
            if player.live and is_running is not None and not is_running():
                replay.extend(follow())  # what it wrote before it exited
                player.live = False
                player.message = f"the simulation finished at tick {replay.last_tick}"
            if close_when_done and not player.live and player.index >= len(replay) - 1:
                break
        player.update(dt)
        state = replay.state_at(player.tick)
        nxt = replay.state_at(player.tick + 1) if player.frac > 0 else None
        overlay = Overlay(paused=player.paused, speed=player.speed, seek_text=player.seek_text, help=player.help,
                          message=player.message)
        renderer.draw(screen, state, player.selected, nxt, player.frac, overlay, player.view)
        pygame.display.flip()
    pygame.quit()
    return 0


#: game-map zoom step of a wheel notch or a key press
ZOOM_STEP = 1.25
#: pixels the mouse must move with a button down before a click becomes a drag
DRAG_SLOP = 5


def _mods(pygame: Any, ev: Any) -> int:
    mod = getattr(ev, "mod", None)
    return pygame.key.get_mods() if mod is None else int(mod)


def handle_event(ev: Any, player: Player, renderer: Any, screen: Any = None, run_dir: Path | None = None) -> bool:
    """Apply one pygame event to ``player`` and ``renderer`` (its camera, what it last drew); returns ``False``
    when the window should close.

    Keys: see :data:`simulacra.viewer.layout.HELP_LINES`. Mouse: a click (button 1, released within
    :data:`DRAG_SLOP` pixels) on an agent selects it, on a counted group expands or folds it, on a place opens its
    panel, on a panel element does what it shows (tab, tier or kind filter, memory, news, agent, search box); a
    click or drag on the timeline seeks there (paused); a drag on the map pans it; the wheel scrolls the panel
    under the mouse; with ctrl held, or over the map, it zooms the map about the mouse.
    Motion sets the tooltip's position (``player.view.hover``).

    Args:
        ev: a ``pygame.event.Event`` (``pos``: pixels in the window).
        screen: the window's surface, for ``S`` (a screenshot into ``run_dir``).
    """
    from simulacra.viewer.render import pygame

    view = player.view
    if ev.type == pygame.QUIT:
        return False
    if ev.type == pygame.MOUSEMOTION:
        view.hover = ev.pos
        d = player.drag
        if d is not None:
            if d["what"] == "timeline":
                player.paused = True
                player.seek(renderer.timeline.tick_at(ev.pos[0]))
            elif d["what"] == "map" and (d["moved"] or abs(ev.pos[0] - d["start"][0]) + abs(ev.pos[1] - d["start"][1])
                                         > DRAG_SLOP):
                d["moved"] = True
                renderer.camera.move(ev.pos[0] - d["last"][0], ev.pos[1] - d["last"][1])
                d["last"] = ev.pos
        return True
    if ev.type == pygame.MOUSEBUTTONDOWN and ev.button in (1, 2, 3):
        view.hover = ev.pos
        if ev.button == 1 and renderer.timeline_rect.collidepoint(ev.pos):
            player.drag = {"what": "timeline", "start": ev.pos, "last": ev.pos, "moved": False}
            player.paused = True
            player.seek(renderer.timeline.tick_at(ev.pos[0]))
        elif renderer.map_rect.collidepoint(ev.pos):
            player.drag = {"what": "map", "start": ev.pos, "last": ev.pos, "moved": ev.button != 1}
        else:
            player.drag = None
            if ev.button == 1:
                _click_panel(renderer.hotspot_at(ev.pos), player, renderer)
        return True
    if ev.type == pygame.MOUSEBUTTONUP and ev.button in (1, 2, 3):
        d, player.drag = player.drag, None
        if d is not None and d["what"] == "map" and not d["moved"] and ev.button == 1:
            _click_map(ev.pos, player, renderer)
        return True
    if ev.type == pygame.MOUSEWHEEL:
        pos = getattr(ev, "pos", None) or view.hover or pygame.mouse.get_pos()
        ctrl = _mods(pygame, ev) & (pygame.KMOD_CTRL | pygame.KMOD_META)
        if ctrl or renderer.map_rect.collidepoint(pos):
            centre = pos if renderer.map_rect.collidepoint(pos) else renderer.map_rect.center
            renderer.camera.zoom_at(centre, ZOOM_STEP ** ev.y)
        elif renderer.panel_rect.collidepoint(pos):
            view.scroll_by(view.panel, -ev.y * 3)
        return True
    if ev.type == pygame.KEYDOWN:
        return _key(ev, player, renderer, screen, run_dir)
    return True


def _click_map(pos: tuple[int, int], player: Player, renderer: Any) -> None:
    hit = renderer.hit(pos)
    if hit is None:
        return
    if hit.kind == "agent":
        player.select(hit.id)
    elif hit.kind == "group":
        player.toggle_group(hit.id)
        player.open_place(hit.id)
    elif hit.kind == "place":
        if hit.id in player.view.expanded and player.view.place == hit.id:
            player.toggle_group(hit.id)  # a second click on an expanded crowd's place folds it
        player.open_place(hit.id)


def _click_panel(action: tuple | None, player: Player, renderer: Any) -> None:
    if action is None:
        player.view.searching = False
        return
    what = action[0]
    player.view.searching = what == "search"
    if what == "panel":
        player.show(action[1])
    elif what == "tier":
        player.toggle_tier(action[1])
    elif what == "kind":
        player.toggle_kind(action[1], renderer.replay.memory.kinds(player.selected))
    elif what == "memory":
        player.pick_memory(action[1])
    elif what == "news":
        player.pick_news(action[1])
    elif what == "agent":
        player.select(action[1])
    elif what == "help":
        player.help = not player.help


def _key(ev: Any, player: Player, renderer: Any, screen: Any, run_dir: Path | None) -> bool:
    from simulacra.viewer.render import pygame

    view = player.view
    player.message = ""
    k, u = ev.key, getattr(ev, "unicode", "") or ""
    if view.searching:  # typing into the memory browser's search box
        if k in (pygame.K_ESCAPE, pygame.K_RETURN, pygame.K_KP_ENTER):
            view.searching = False
        elif k == pygame.K_BACKSPACE:
            view.search = view.search[:-1]
        elif u and u.isprintable():
            view.search += u
        view.scroll["memory"] = 0
        view.memory = None
        return True
    if k in (pygame.K_ESCAPE, pygame.K_q) and player.seek_text is None:
        return False
    if k == pygame.K_ESCAPE:
        player.seek_text = None
    elif u.isdigit() and u:
        player.type_digit(u)
    elif k == pygame.K_BACKSPACE and player.seek_text:
        player.seek_text = player.seek_text[:-1]
    elif k in (pygame.K_RETURN, pygame.K_KP_ENTER, pygame.K_g):
        player.confirm_seek()
    elif k == pygame.K_SPACE:
        player.toggle_pause()
    elif k == pygame.K_RIGHT:
        player.step(1)
    elif k == pygame.K_LEFT:
        player.step(-1)
    elif k == pygame.K_HOME:
        player.paused = True
        player.seek(player.replay.first_tick)
    elif k == pygame.K_END:
        player.paused = True
        player.seek(player.replay.last_tick)
    elif u in ("+", "=") or k == pygame.K_KP_PLUS:
        player.faster(1)
    elif u in ("-", "_") or k == pygame.K_KP_MINUS:
        player.faster(-1)
    elif k == pygame.K_TAB:
        player.next_agent(-1 if _mods(pygame, ev) & pygame.KMOD_SHIFT else 1)
        view.memory = None
    elif k == pygame.K_h:
        player.help = not player.help
    elif k == pygame.K_i:
        player.show("agent")
    elif k == pygame.K_m:
        player.show("memory")
    elif k == pygame.K_p:
        player.show("place")
    elif k == pygame.K_n:
        player.show("news")
    elif u == "/" or k == pygame.K_SLASH:
        player.show("memory")
        view.searching = True
    elif k == pygame.K_r:
        view.relations = not view.relations
    elif k == pygame.K_b:
        view.bubbles = not view.bubbles
    elif k == pygame.K_e:
        crowded = {g for g in renderer.groups} | view.expanded
        view.expanded = set() if view.expanded else crowded
    elif u == "[":
        renderer.camera.zoom_at(renderer.map_rect.center, 1 / ZOOM_STEP)
    elif u == "]":
        renderer.camera.zoom_at(renderer.map_rect.center, ZOOM_STEP)
    elif k == pygame.K_c:
        renderer.camera.reset()
    elif k == pygame.K_PAGEDOWN:
        view.scroll_by(view.panel, 8)
    elif k == pygame.K_PAGEUP:
        view.scroll_by(view.panel, -8)
    elif k == pygame.K_s and screen is not None and run_dir is not None:
        out = screenshot_name(run_dir, player.tick)
        pygame.image.save(screen, str(out))
        player.message = f"saved {out.name}"
    return True


#: the smallest window the viewer lays out (map, panel and timeline), pixels
MIN_SIZE = (800, 500)
#: the largest window or screenshot, pixels (an 8K screen; a 100000x100000 surface would need 40 GB)
MAX_SIZE = (7680, 4320)


def check_size(size: tuple[int, int]) -> tuple[int, int]:
    """``size`` (width, height in pixels) when it is whole numbers from :data:`MIN_SIZE` to :data:`MAX_SIZE`: the one
    check of a window's and a screenshot's size (``simulacra view``, ``replay``, :func:`save_screenshot`).

    Raises:
        SimulacraError: naming the size and the range.
    """
    ok = (isinstance(size, (tuple, list)) and len(size) == 2 and all(is_whole(v) for v in size))
    if not ok or not (MIN_SIZE[0] <= size[0] <= MAX_SIZE[0] and MIN_SIZE[1] <= size[1] <= MAX_SIZE[1]):
        raise SimulacraError(f"size must be (width, height) from {MIN_SIZE[0]}x{MIN_SIZE[1]} to "
                             f"{MAX_SIZE[0]}x{MAX_SIZE[1]} pixels, got {size!r}")
    return int(size[0]), int(size[1])


def parse_size(text: str) -> tuple[int, int]:
    """A ``--size`` argument, ``"1280x800"``, as ``(width, height)`` (:func:`check_size`).

    Raises:
        SimulacraError: not WIDTHxHEIGHT, or out of range.
    """
    try:
        width, height = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise SimulacraError(f"--size must look like 1280x800, got {text!r}") from None
    return check_size((width, height))


def check_view(replay: ReplayState, tick: int | None, agent: str | None, size: tuple[int, int]) -> None:
    """What the window and the screenshot are asked to show, checked: ``tick`` one of the run's (``None``: the
    default), ``agent`` one of its agents (``None``: nobody selected), ``size`` within :func:`check_size`.

    Raises:
        SimulacraError: naming the value and what the run has.
    """
    if tick is not None and not (is_whole(tick) and replay.first_tick <= tick <= replay.last_tick):
        raise SimulacraError(f"tick {tick!r}: this run has ticks {replay.first_tick}..{replay.last_tick}")
    if agent is not None and agent not in replay.agents:
        raise SimulacraError(f"agent {agent!r}: not in this run; agents are {', '.join(replay.agents)}")
    check_size(size)


def save_screenshot(replay: ReplayState, tick: int, out: str | Path, selected: str | None = None,
                    size: tuple[int, int] = (1280, 800), view: View | None = None) -> Path:
    """Render ``tick`` without a window (no display needed) and save it as PNG at ``out``; returns the path.

    Raises:
        SimulacraError: a tick, agent or size the run cannot show (:func:`check_view`), a path not ending in
            ``.png``, or one that cannot be written.
    """
    from simulacra.viewer.render import pygame, render_tick

    check_view(replay, tick, selected, size)
    if Path(out).suffix.lower() != ".png":
        raise SimulacraError(f"the screenshot is a PNG: give a path ending in .png, got {str(out)!r}")

    surface, _ = render_tick(replay, tick, selected, size, view)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        pygame.image.save(surface, str(out))
    except pygame.error as err:  # an unwritable path: SDL's message, not a traceback
        raise SimulacraError(f"cannot save the screenshot {out}: {err}") from None
    return out
