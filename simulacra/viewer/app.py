"""The replay window: a pygame loop over a :class:`~simulacra.viewer.state.ReplayState`.

Playback position is a float tick (``Player.position``): its integer part is the tick shown, its fraction how
far the agents have walked towards the next tick's places. All controls act on :class:`Player`, which has no
pygame in it, so the key bindings are easy to test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

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
            if ev.type == pygame.QUIT:
                running = False
            elif ev.type == pygame.MOUSEBUTTONDOWN and ev.button == 1:
                hit = renderer.agent_at(ev.pos)
                if hit is not None:
                    player.selected = hit
            elif ev.type == pygame.KEYDOWN:
                player.message = ""
                k, u = ev.key, ev.unicode
                if k in (pygame.K_ESCAPE, pygame.K_q) and player.seek_text is None:
                    running = False
                elif k == pygame.K_ESCAPE:
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
                    player.seek(replay.first_tick)
                elif k == pygame.K_END:
                    player.paused = True
                    player.seek(replay.last_tick)
                elif u in ("+", "=") or k == pygame.K_KP_PLUS:
                    player.faster(1)
                elif u in ("-", "_") or k == pygame.K_KP_MINUS:
                    player.faster(-1)
                elif k == pygame.K_TAB:
                    player.next_agent(-1 if ev.mod & pygame.KMOD_SHIFT else 1)
                elif k == pygame.K_h:
                    player.help = not player.help
                elif k == pygame.K_s:
                    out = screenshot_name(run_dir, player.tick)
                    pygame.image.save(screen, str(out))
                    player.message = f"saved {out.name}"
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
        renderer.draw(screen, state, player.selected, nxt, player.frac, overlay)
        pygame.display.flip()
    pygame.quit()
    return 0


def save_screenshot(replay: ReplayState, tick: int, out: str | Path, selected: str | None = None,
                    size: tuple[int, int] = (1280, 800)) -> Path:
    """Render ``tick`` without a window (no display needed) and save it as PNG at ``out``; returns the path."""
    from simulacra.viewer.render import pygame, render_tick

    surface, _ = render_tick(replay, tick, selected, size)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pygame.image.save(surface, str(out))
    return out
