"""Where a run's Chroma collections live: embedded folders (the default) or a Chroma server.

Embedded (:class:`EmbeddedChroma`): one ``chromadb.PersistentClient`` for the run at ``database/<run>/chroma/``,
one collection per tier (``static``, ``short_term``, ``long_term``, ``shared``) shared by the owners, each record
tagged with its owner (runs made before session 7: one client per owner under ``database/<run>/<agent>/`` and
``database/<run>/town/``, still read and resumed). A new store's SQLite file is made in write-ahead-log mode
(:func:`use_wal`: one fsync per write instead of four).

Server (:class:`ChromaServer`, ``memory.chroma_url: http://host:port``): one ``chromadb.HttpClient`` for the
whole run and one collection per owner and tier, named by :func:`collection_name` from the run folder's name, the
owner (agent id or ``town``) and the tier, and tagged with the metadata ``{"simulacra_run", "owner", "tier"}`` so
that a new run can tell whether the server already holds collections of a run of the same name. Every call to
the server is retried with exponential backoff (tenacity) on transport errors (refused or dropped connections,
timeouts) and Chroma's internal errors until ``memory.chroma_retry_s`` seconds have passed since the first
failure; then :class:`~simulacra.errors.StoreUnavailable` is raised, which stops a run cleanly at its last
complete tick (:meth:`simulacra.simulation.Simulation.run`). Every write a tier makes is idempotent (upsert by
id, delete by id, metadata update by id), so a call retried after a lost answer changes nothing twice. A
server restarted on the same ``--path`` within the window is simply used again.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from simulacra.errors import CheckpointError, RunExistsError, SimulacraError, StoreUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

#: longest collection name made: Chroma 1.x accepts 3-512 characters, older servers 3-63
MAX_NAME = 63
#: the SQLite file of an embedded Chroma store, in its folder
SQLITE_FILE = "chroma.sqlite3"
#: folder of a run's embedded town store (every owner's collections), in the run folder
TOWN_STORE = "chroma"
#: metadata key of a record's owner in a collection several owners share (agent id or ``town``)
OWNER_KEY = "owner"
#: metadata key naming the run a collection belongs to
RUN_KEY = "simulacra_run"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def open_chroma(path: str | Path):
    """A persistent Chroma client at ``path`` (created if missing) with telemetry off; a new store's SQLite file
    is made in write-ahead-log mode (:func:`use_wal`).

    Raises:
        SimulacraError: ``path`` (or a folder above it) is a file; Chroma cannot open the store there (a damaged
            ``chroma.sqlite3``: Chroma's own error, named with the folder).
    """
    import chromadb
    from chromadb.config import Settings
    from chromadb.errors import ChromaError

    blocked = next((p for p in (Path(path), *Path(path).parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise SimulacraError(f"{path}: cannot hold a memory store: {blocked} is a file, not a folder")
    Path(path).mkdir(parents=True, exist_ok=True)
    use_wal(path)
    try:
        return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    except ChromaError as err:  # e.g. "database disk image is malformed": the file was damaged outside simulacra
        raise SimulacraError(f"{path}: Chroma cannot open the memory store there ({type(err).__name__}: {err}); "
                             f"its chroma.sqlite3 was damaged or changed outside simulacra") from None


def use_wal(path: str | Path) -> bool:
    """Create the SQLite file of a new Chroma store in folder ``path`` in SQLite's write-ahead-log journal mode;
    returns whether it did (``False``: the store exists already, and is left in the mode it has).

    Why: an embedded Chroma store (chromadb 1.x) uses SQLite's default rollback journal with ``synchronous=FULL``, so
    every write (one per collection each time a run writes its stores) costs four fsyncs (the journal twice, the
    database, the folder); in WAL mode a commit appends to ``chroma.sqlite3-wal`` and fsyncs it once, as durably
    (SQLite, "Write-Ahead Logging", https://sqlite.org/wal.html). The mode is recorded in the file, so Chroma's own
    connections use it. The log grows to about 4 MB per store during a run (SQLite's automatic checkpoint at 1000 pages)
    and is folded into the database and removed when the process ends normally.

    Only a new file is touched: Chroma links its own copy of SQLite, and another copy opening a file that Chroma
    has open in the same process would drop Chroma's POSIX locks, or delete its log, when it closes (SQLite, "How
    To Corrupt An SQLite Database File": multiple copies of SQLite in one application). A store made before this
    rule keeps its rollback journal.
    """
    db = Path(path) / SQLITE_FILE
    if db.exists():
        return False
    with closing(sqlite3.connect(db)) as con:
        mode = con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":  # pragma: no cover - a file system without shared memory (WAL needs it)
        log.warning("%s: SQLite kept journal mode %s; the store's writes stay slower", db, mode)
    return mode == "wal"


def _clean(part: str) -> str:
    """``part`` with every run of characters other than ``[A-Za-z0-9_-]`` made one ``-``, and leading and
    trailing ``_``/``-`` dropped (a name must start and end with a letter or digit); ``"x"`` if nothing is left."""
    return _UNSAFE.sub("-", part).strip("_-") or "x"


def collection_name(run: str, owner: str, tier: str) -> str:
    """The Chroma collection of ``owner``'s ``tier`` in run ``run`` on a server: ``<run>.<owner>.<tier>``.

    Valid under Chroma's rules (3-63 characters of ``[A-Za-z0-9._-]``, starting and ending with a letter or
    digit, no ``..``, not an IPv4 address). When ``run`` or ``owner`` holds other characters or the name would
    be longer than 63, the two parts are shortened and cleaned and a hash of the exact ``(run, owner, tier)`` is
    added, so different runs and owners never share a collection: ``<run[:24]>.<owner[:16]>-<sha256[:10]>.<tier>``.

    Example: ``collection_name("fernhollow-seed0", "greta_lund", "short_term")`` is
    ``"fernhollow-seed0.greta_lund.short_term"``.
    """
    if tier != _clean(tier) or not tier:
        raise ValueError(f"tier name {tier!r} must be letters, digits, '_' or '-'")
    plain = f"{run}.{owner}.{tier}"
    if _clean(run) == run and _clean(owner) == owner and len(plain) <= MAX_NAME:
        return plain
    digest = hashlib.sha256(f"{run}\0{owner}\0{tier}".encode()).hexdigest()[:10]
    name = f"{_clean(run)[:24].strip('_-') or 'x'}.{_clean(owner)[:16]}-{digest}.{tier}"
    return name[:MAX_NAME]


def journal_args(location, owner: str, tier: str) -> dict[str, Any]:
    """The ``journal`` argument of :class:`~simulacra.memory.store.MemoryTier` for ``owner``'s ``tier`` at
    ``location`` (its ``journal`` attribute, a :class:`~simulacra.memory.journal.StoreJournal` that
    :func:`simulacra.runtime.store_location` sets), or nothing when the location has none."""
    from simulacra.memory.journal import journal_key

    journal = getattr(location, "journal", None)
    return {} if journal is None else {"journal": (journal, journal_key(owner, tier))}


class EmbeddedChroma:
    """A run's collections in embedded Chroma under ``run_dir``; no retries.

    Layout of a run made since session 7 (``town``): one ``PersistentClient`` at ``<run_dir>/chroma/``
    (:data:`TOWN_STORE`) holding one collection per tier (``static``, ``short_term``, ``long_term``, ``shared``)
    shared by every owner; each record's metadata names its owner (``owner``, an agent id or ``town``), and a
    :class:`~simulacra.memory.store.MemoryTier` is one owner's part. A tick's writes of all agents to one tier are
    then one Chroma call (:func:`~simulacra.memory.store.flush_tiers`), and a run holds one client (one SQLite
    file, one set of caches) instead of one per agent.

    Layout of an older run (``owners``): one ``PersistentClient`` per owner under ``<run_dir>/<owner>/``, its
    collections named after the tiers (and a ``trash``); such a run is read, resumed and written in its own layout.

    Args:
        run_dir: the run folder.
        layout: ``"town"`` or ``"owners"``; default: what the folder holds (``town`` for a new run).
    Raises:
        ValueError: another ``layout``.
    """

    remote = False
    #: the run's store journal (:mod:`simulacra.memory.journal`), set by :func:`simulacra.runtime.store_location`
    journal = None

    def __init__(self, run_dir: str | Path, layout: str | None = None):
        self.run_dir = Path(run_dir)
        if layout is None:
            layout = "town" if (self.run_dir / TOWN_STORE / SQLITE_FILE).is_file() or not self._owner_stores() \
                else "owners"
        if layout not in ("town", "owners"):
            raise ValueError(f"layout {layout!r}: expected 'town' or 'owners'")
        self.layout = layout

    def _owner_stores(self) -> bool:
        try:
            return any((p / SQLITE_FILE).is_file() for p in self.run_dir.iterdir() if p.is_dir())
        except FileNotFoundError:
            return False

    def __str__(self) -> str:
        return str(self.run_dir)

    def client(self, owner: str):
        """The client holding ``owner``'s collections: the run's one client (``<run_dir>/chroma``), or in an older
        run the client of ``<run_dir>/<owner>``."""
        return open_chroma(self.run_dir / (TOWN_STORE if self.layout == "town" else owner))

    def tier_args(self, owner: str, tier: str) -> dict[str, Any]:
        """Keyword arguments of :class:`~simulacra.memory.store.MemoryTier` for ``owner``'s ``tier``: its ``owner``
        in the shared collection named after the tier (none in an older run: the collection is the owner's)."""
        return {"owner": owner, **journal_args(self, owner, tier)} if self.layout == "town" \
            else journal_args(self, owner, tier)

    def claim(self, resume: bool, overwrite: bool) -> None:
        """Nothing to do: the run folder, made or reopened by the caller, holds the stores."""

    def has_store(self, owner: str, tier: str = "static") -> bool:
        """Whether the run folder holds ``owner``'s ``tier`` (at least one record of it; in an older run, whether
        the owner's folder has a store, or for ``trash`` that collection)."""
        if self.layout == "owners":
            folder = self.run_dir / owner
            if not (folder / SQLITE_FILE).is_file():
                return False
            return tier != "trash" or "trash" in {c.name for c in open_chroma(folder).list_collections()}
        if tier == "trash" or not (self.run_dir / TOWN_STORE / SQLITE_FILE).is_file():
            return False
        client = open_chroma(self.run_dir / TOWN_STORE)
        if tier not in {c.name for c in client.list_collections()}:
            return False
        got = client.get_collection(tier).get(where={OWNER_KEY: owner}, limit=1, include=[])
        return bool(got["ids"])


class ChromaServer:
    """The collections of one run on a Chroma server.

    Args:
        url: ``http://host:port`` (or ``https://``) of the server; the port defaults to 8000.
        run: the run's name (its folder's name), from which collection names are derived.
        retry_s: seconds the server may stay unreachable before a call gives up (> 0).
        timeout_s: seconds one HTTP request may take before it counts as failed (then retried).
        connect_s: seconds to keep trying when connecting at start (default ``min(retry_s, 10)``).
        initial_wait_s, max_wait_s: exponential backoff between tries: ``initial_wait_s * 2**n`` seconds, at most
            ``max_wait_s``.
    Raises:
        StoreUnavailable: no Chroma server answers at ``url`` within ``connect_s`` seconds, or ``url`` is not an
            ``http(s)://host[:port]`` address.
    Attributes:
        retries: calls retried so far; url: the server's address.
    """

    remote = True
    journal = None  # as EmbeddedChroma.journal

    def __init__(self, url: str, run: str, retry_s: float = 60.0, timeout_s: float = 60.0,
                 connect_s: float | None = None, initial_wait_s: float = 0.25, max_wait_s: float = 5.0):
        p = urlparse(url)
        if p.scheme not in ("http", "https") or not p.hostname or p.path not in ("", "/") or p.query:
            raise StoreUnavailable(f"memory.chroma_url {url!r}: expected http://host:port (a Chroma server, e.g. "
                                   "started with 'chroma run --path DIR --port 8000')")
        self.url = f"{p.scheme}://{p.netloc}"
        self.run = run
        self.retry_s = retry_s
        self.timeout_s = timeout_s
        self.initial_wait_s = initial_wait_s
        self.max_wait_s = max_wait_s
        self.retries = 0
        self._client = self.call(lambda: self._connect(p.hostname, p.port or 8000, p.scheme == "https"),
                                 "connecting", min(retry_s, 10.0) if connect_s is None else connect_s)

    def __str__(self) -> str:
        return f"the Chroma server at {self.url}"

    def _connect(self, host: str, port: int, ssl: bool):
        import chromadb
        import httpx
        from chromadb.config import Settings

        try:
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False))
        except ValueError as err:  # chromadb wraps a refused connection in a ValueError
            raise httpx.ConnectError(str(err)) from err
        session = getattr(getattr(client, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):  # chromadb sets no timeout: a hung server would hang the run
            session.timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))
        else:  # pragma: no cover - another chromadb layout
            log.debug("could not set the Chroma client's timeout")
        client.heartbeat()
        return client

    # ----------------------------------------------------------------- retries
    @staticmethod
    def transient(err: BaseException) -> bool:
        """Whether ``err`` is worth retrying: a transport error (refused, reset or dropped connection, timeout)
        or a Chroma error with a 5xx code."""
        import httpx
        from chromadb.errors import ChromaError

        if isinstance(err, httpx.TransportError):
            return True
        if isinstance(err, ChromaError):
            try:
                return int(err.code()) >= 500
            except Exception:  # noqa: BLE001 - an error without a code is not retried
                return False
        return False

    def _window_words(self, window: float) -> str:
        """Where a call's retry window comes from, for its messages: ``memory.chroma_retry_s``, or at most 10 s of
        it while connecting at start."""
        return (f"memory.chroma_retry_s={window:g}" if window == self.retry_s else
                f"{window:g} s while connecting at start; memory.chroma_retry_s={self.retry_s:g} after that")

    def _before_sleep(self, state: RetryCallState, window: float) -> None:
        self.retries += 1
        err = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("the Chroma server at %s did not answer (%s: %s); try %d again in %.1f s (gives up %.0f s after "
                    "the first failure: %s)", self.url, type(err).__name__, err,
                    state.attempt_number + 1, wait, window, self._window_words(window))

    def call(self, fn: Callable[[], T], what: str, window_s: float | None = None) -> T:
        """``fn()``, retried with backoff on :meth:`transient` errors for up to ``window_s`` seconds (default
        ``retry_s``) after the first failure.

        Raises:
            StoreUnavailable: still failing when the window has passed (the message names the server, the
                operation, the window and the last error).
        """
        window = self.retry_s if window_s is None else window_s
        retrying = Retrying(stop=stop_after_delay(window), retry=retry_if_exception(self.transient),
                            wait=wait_exponential(multiplier=self.initial_wait_s, max=self.max_wait_s),
                            before_sleep=lambda state: self._before_sleep(state, window), reraise=True)
        start = time.monotonic()
        try:
            return retrying(fn)
        except Exception as err:
            if not self.transient(err):
                raise
            raise StoreUnavailable(f"the Chroma server at {self.url} did not answer for {time.monotonic() - start:.0f} "
                                   f"s ({what}; {self._window_words(window)}): {type(err).__name__}: {err}"
                                   ) from None

    # ----------------------------------------------------------------- collections
    def client(self, owner: str):
        """The run's one HTTP client (shared by every owner)."""
        return self._client

    def tier_args(self, owner: str, tier: str) -> dict[str, Any]:
        """Keyword arguments of :class:`~simulacra.memory.store.MemoryTier` for ``owner``'s ``tier``: the
        collection's name (:func:`collection_name`), its metadata and the retrying call."""
        return {"name": collection_name(self.run, owner, tier),
                "metadata": {RUN_KEY: self.run, "owner": owner, "tier": tier}, "retry": self.call,
                **journal_args(self, owner, tier)}

    def claim(self, resume: bool, overwrite: bool) -> None:
        """Make sure the server's collections of this run are what the run expects before anything is written:
        a resumed run's are there; a new run's are not (deleted first with ``overwrite``).

        Raises:
            CheckpointError: ``resume`` and the server holds no collection of the run (another server?).
            RunExistsError: a new run, the server already holds collections of a run of this name, and not
                ``overwrite``.
            StoreUnavailable: the server stopped answering.
        """
        held = self.run_collections()
        if resume and not held:
            raise CheckpointError(f"{self} holds no collection of run {self.run}: is memory.chroma_url (--chroma-url) "
                                  "the server this run used?")
        if not resume and held:
            if not overwrite:
                raise RunExistsError(f"{self} already holds {len(held)} collections of a run named {self.run} "
                                     f"({held[0]}, ...): replace them with overwrite (--overwrite) or choose "
                                     "another run name (--run-name)")
            self.delete_run(held)

    def run_collections(self) -> list[str]:
        """Names of the server's collections tagged with this run, sorted."""
        cols = self.call(lambda: self._client.list_collections(), "listing collections")
        return sorted(c.name for c in cols if (c.metadata or {}).get(RUN_KEY) == self.run)

    def has_store(self, owner: str, tier: str = "static") -> bool:
        """Whether the server holds ``owner``'s ``tier`` in this run."""
        name = collection_name(self.run, owner, tier)
        return name in self.run_collections()

    def delete_run(self, names: Sequence[str] | None = None) -> int:
        """Delete the collections of this run (``names``, default :meth:`run_collections`); returns how many."""
        names = self.run_collections() if names is None else list(names)
        for n in names:
            self.call(lambda n=n: self._client.delete_collection(n), f"deleting collection {n}")
        return len(names)
