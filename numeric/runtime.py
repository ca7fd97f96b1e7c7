"""Process state of the float tier, in one place.

Library code of the float tier changes nothing process-wide, and nothing at all on import
(``tests/test_runtime.py`` imports every module of ``numeric`` and checks threads, environment
and stdout). What must change process state does it through this module, scoped where it can be:

- **threads**: ``pinned_threads()`` sets torch, the BLAS/OpenMP pools and the thread variables
  to one thread and restores all of them when the last user leaves; ``torch_threads``,
  ``one_blas_thread`` and ``one_native_thread`` scope a single pool. One thread makes a float
  result independent of the core count (reductions split over threads add in another order)
  and is the fastest setting for the search's small products on a shared machine;
- **the stop token**: a clean stop (the bracket command's first Ctrl-C) is a ``StopToken``
  held in a ``ContextVar`` for the ``stop_scope`` that made it, never a module global: two runs
  in one process (or a run after a stopped one) do not see each other's request;
- **workers**: ``worker_init`` sets a panel worker process's state for its life (threads, stdout
  sent to stderr, exit when the parent dies);
- **the allocator**: ``keep_freed_memory`` (glibc ``mallopt``) for the study's bootstrap;
- **figures**: ``pyplot()``, matplotlib's pyplot on the off-screen Agg backend (a backend is
  chosen once per process, so it is loaded only when a figure is drawn);
- **Ctrl-C**: ``sigint_stop``, the bracket command's SIGINT handler (first Ctrl-C requests the stop
  token, the second aborts), restored when the command's block ends;
- **file descriptor 1**: ``stdout_silenced``, fd 1 on /dev/null for a block (a C library's banner);
- **the environment**: ``offline_hub`` (Hugging Face offline, for the process: the entry points call
  it), ``environment`` (variables set for a block), ``quiet_transformers`` (its process-wide logger);
- **torch's determinism**: ``deterministic_torch``, seed, threads and deterministic kernels for a
  training block, restored after it;
- **the trial trace**: ``trial_trace``, the searches' record of their trials and descents for a
  block (tests and probes read it), a ``ContextVar`` like the stop token;
- **the work observer**: ``work_observer``, a callback told of every unit of work a budget spends in
  a block (progress displays only; the searches never read it).

>>> import os
>>> before = os.environ.get("OMP_NUM_THREADS")
>>> with pinned_threads(torch=False):
...     os.environ["OMP_NUM_THREADS"]
'1'
>>> os.environ.get("OMP_NUM_THREADS") == before
True
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import sys
import threading
import time
import signal
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from typing import Any

from threadpoolctl import threadpool_limits

from numeric._optional import loaded, require

__all__ = ["THREADS", "SEARCH_THREADS", "WORKER_THREADS", "THREAD_VARIABLES", "PARENT_POLL_S", "ORPHAN_EXIT",
           "pinned_threads", "torch_threads", "one_blas_thread", "one_native_thread", "StopToken",
           "stop_scope", "current_stop_token", "stop_requested", "worker_init", "stdout_to_stderr",
           "keep_freed_memory", "pyplot", "sigint_stop", "stdout_silenced", "offline_hub", "OFFLINE_VARIABLES",
           "environment", "quiet_transformers", "deterministic_torch", "TrialRecord", "TrialTrace", "trial_trace",
           "record_trial", "record_refine", "work_observer", "note_work"]

#: One torch/BLAS thread: N panel workers fill N cores without oversubscription, and a float result
#: never depends on a thread count.
THREADS = 1
#: The search's thread count and a panel worker's (both ``THREADS``; the names say who uses it).
SEARCH_THREADS = WORKER_THREADS = THREADS
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: How often a worker checks that its parent still lives: an orphan (parent killed with kill -9)
#: exits within this, instead of computing on unseen.
PARENT_POLL_S = 1.0
#: Exit status of a worker whose parent died.
ORPHAN_EXIT = 70


# ---- threads ------------------------------------------------------------------------------------

class _Pin:
    """The one process-wide pinning: entered by the first user, restored by the last."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.threads = THREADS
        self.env: dict[str, str | None] = {}
        self.limits: Any = None
        self.torch: Any = None             # the torch module pinned, or None
        self.torch_before = 0


_PIN = _Pin()


@contextlib.contextmanager
def pinned_threads(threads: int = THREADS, torch: bool = True) -> Iterator[None]:
    """Run the block with ``threads`` torch, BLAS and OpenMP threads (and the thread variables set to
    it); restore everything on exit.

    Thread counts are process-wide, so concurrent users in one process (the panel's Dask threads,
    the command line around a search) share one pinning: the first to enter sets it, the last to
    leave restores what the first found; a user asking for another count meanwhile is an error.
    ``torch=False``: a command that never uses torch (the study) does not import it just to pin it
    (about 1.5 s); a torch already imported, or imported by a later user, is pinned all the same."""
    with _PIN.lock:
        if _PIN.depth and threads != _PIN.threads:
            raise RuntimeError(f"threads are pinned to {_PIN.threads} already; cannot pin {threads}")
        if _PIN.depth == 0:
            _PIN.threads = threads
            _PIN.env = {v: os.environ.get(v) for v in THREAD_VARIABLES}
            for v in THREAD_VARIABLES:
                os.environ[v] = str(threads)
            _PIN.limits = threadpool_limits(limits=threads)
        if _PIN.torch is None:
            module = require("torch") if torch else loaded("torch")
            if module is not None:
                _PIN.torch, _PIN.torch_before = module, module.get_num_threads()
                module.set_num_threads(threads)
        _PIN.depth += 1
    try:
        yield
    finally:
        with _PIN.lock:
            _PIN.depth -= 1
            if _PIN.depth == 0:
                if _PIN.torch is not None:
                    _PIN.torch.set_num_threads(_PIN.torch_before)
                    _PIN.torch = None
                _PIN.limits.restore_original_limits()
                _PIN.limits = None
                for v, value in _PIN.env.items():
                    if value is None:
                        os.environ.pop(v, None)
                    else:
                        os.environ[v] = value


@contextlib.contextmanager
def torch_threads(n: int = SEARCH_THREADS) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads and restore the count (the descents' own guard:
    on a shared 2-core machine two threads ran the small products of a descent 20 times slower)."""
    torch = require("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit BLAS to one thread inside the ``with`` block (threadpoolctl).

    The descriptors and the study work on many small matrices, where a multi-threaded OpenBLAS on a
    shared machine is 10 to 30 times slower than one thread. Nothing changes until the block is
    entered, and the previous limits are restored when it is left, also on an exception.

    >>> from threadpoolctl import threadpool_info
    >>> def blas_threads():
    ...     return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    >>> before = blas_threads()
    >>> with one_blas_thread():
    ...     inside = blas_threads()
    >>> set(inside) <= {1}, blas_threads() == before
    (True, True)
    """
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def one_native_thread() -> Iterator[None]:
    """Limit every native pool (BLAS and OpenMP) to one thread inside the block; restore on exit."""
    with threadpool_limits(limits=1):
        yield


# ---- the stop token -----------------------------------------------------------------------------

class StopToken:
    """A request to stop cleanly: the searches holding it end with what they have.

    Thread-safe (an ``Event``); ``request`` may be called from a signal handler.

    >>> t = StopToken(); t.requested
    False
    >>> t.request(); t.requested
    True
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def request(self) -> None:
        """Ask every search holding this token to stop with what it has."""
        self._event.set()

    @property
    def requested(self) -> bool:
        """Whether ``request`` was called."""
        return self._event.is_set()


_STOP_TOKEN: ContextVar[StopToken | None] = ContextVar("numeric_stop_token", default=None)


@contextlib.contextmanager
def stop_scope(token: StopToken | None = None) -> Iterator[StopToken]:
    """Make ``token`` (a fresh one by default) the current stop token for the block; yield it.

    The token belongs to the block's context: the code outside the block, and threads started
    without ``contextvars.copy_context()``, do not see it.

    >>> with stop_scope() as t:
    ...     t.request(); stop_requested()
    True
    >>> stop_requested()
    False
    """
    token = StopToken() if token is None else token
    reset = _STOP_TOKEN.set(token)
    try:
        yield token
    finally:
        _STOP_TOKEN.reset(reset)


def current_stop_token() -> StopToken | None:
    """The token of the innermost ``stop_scope``, or None outside every scope."""
    return _STOP_TOKEN.get()


def stop_requested() -> bool:
    """Whether the current stop token (if any) has been requested."""
    token = _STOP_TOKEN.get()
    return token is not None and token.requested


@contextlib.contextmanager
def sigint_stop(message: str) -> Iterator[StopToken]:
    """Run the block in a fresh ``stop_scope`` with a SIGINT handler; yield its token. First Ctrl-C:
    request the token (the searches holding it end with what they have) and print ``message`` on
    stderr; second: ``KeyboardInterrupt`` (abort). The previous handler is restored when the block ends.

    For a command's main function: signal handlers belong to the main thread, so elsewhere the
    block runs without one (the token can still be requested by the caller)."""
    with stop_scope() as token:
        if threading.current_thread() is not threading.main_thread():
            yield token
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            if token.requested:
                raise KeyboardInterrupt
            token.request()
            print(message, file=sys.stderr, flush=True)

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield token
        finally:
            signal.signal(signal.SIGINT, previous)


# ---- file descriptors and the environment -------------------------------------------------------

@contextlib.contextmanager
def stdout_silenced() -> Iterator[None]:
    """File descriptor 1 on /dev/null for the block, the original restored after it (also on an
    exception). For C code that prints on fd 1 where ``--json`` output goes (HiGHS's banner, printed
    by its first ``Highs()``); Python's ``sys.stdout`` is flushed first so nothing of ours is lost."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


#: Hugging Face's offline switches: huggingface_hub and transformers read them (some at import).
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def offline_hub() -> None:
    """Make the process offline for Hugging Face, for the rest of its life (not restored: the hub
    library reads the variables when it is imported, and the float tier never downloads; every load
    also passes ``local_files_only=True``). Called by the entry points (``python -m numeric``, the
    ``softrank`` front door) and by a panel worker's ``worker_init``, before a model is loaded."""
    for v in OFFLINE_VARIABLES:
        os.environ[v] = "1"


@contextlib.contextmanager
def environment(**variables: str) -> Iterator[None]:
    """The environment variables ``variables`` set for the block; each restored (or removed) after it.

    >>> with environment(SOFTRANK_PROBE="1"):
    ...     os.environ["SOFTRANK_PROBE"]
    '1'
    >>> "SOFTRANK_PROBE" in os.environ
    False
    """
    before = {v: os.environ.get(v) for v in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for v, value in before.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value


def quiet_transformers() -> None:
    """No warnings, notices or progress bars from transformers on stderr, for the rest of the process
    (its logger is process-wide): a command's stderr carries its own log and one-line errors."""
    transformers = require("transformers")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


# ---- torch's determinism --------------------------------------------------------------------------

@contextlib.contextmanager
def deterministic_torch(seed: int, threads: int) -> Iterator[Any]:
    """A training block: torch's global generator seeded with ``seed``, ``threads`` intra-op threads,
    nondeterministic kernels forbidden; yields a fresh ``torch.Generator`` seeded with ``seed`` (the
    batches' draws). torch's generator state, thread count and kernel setting are restored after the
    block. Same seed, same threads: the same weights, on the same torch build."""
    torch = require("torch")
    state, before, strict = torch.get_rng_state(), torch.get_num_threads(), \
        torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield torch.Generator().manual_seed(seed)
    finally:
        torch.use_deterministic_algorithms(strict)
        torch.set_num_threads(before)
        torch.set_rng_state(state)


# ---- the trial trace ------------------------------------------------------------------------------

#: One trial of the upper search: ``(phase, start, rank, steps, error)``.
TrialRecord = tuple[str, str, int, int, float]


@dataclass
class TrialTrace:
    """What the searches run inside one ``trial_trace`` did: ``trials``, one ``TrialRecord`` per trial of
    the upper search; ``refines``, the ``numeric.search.refine.TrialLog`` of every descent."""

    trials: list[TrialRecord] = field(default_factory=list)
    refines: list[Any] = field(default_factory=list)


_TRACE: ContextVar[TrialTrace | None] = ContextVar("numeric_trial_trace", default=None)


@contextlib.contextmanager
def trial_trace() -> Iterator[TrialTrace]:
    """Record every trial and descent of the searches run in the block (this context: the thread, or
    the ``contextvars`` copy a thread was started with); yield the record. The searches never read it
    (tests and probes do), so a result is the same with or without it.

    >>> with trial_trace() as trace:
    ...     record_trial(("fit", "svd", 2, 10, 0.5))
    >>> trace.trials
    [('fit', 'svd', 2, 10, 0.5)]
    """
    trace = TrialTrace()
    reset = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(reset)


def record_trial(record: TrialRecord) -> None:
    """Append ``record`` to the current ``trial_trace``'s trials (nothing outside one)."""
    trace = _TRACE.get()
    if trace is not None:
        trace.trials.append(record)


def record_refine(log: Any) -> None:
    """Append a descent's ``TrialLog`` to the current ``trial_trace``'s refines (nothing outside one)."""
    trace = _TRACE.get()
    if trace is not None:
        trace.refines.append(log)


# ---- worker processes ---------------------------------------------------------------------------

def stdout_to_stderr() -> None:
    """Send file descriptor 1 to stderr for the rest of the process, and disable progress bars.

    For a worker process only: its stdout belongs to the parent (tables, ``--json``), and what C
    code prints (solver banners) must not land there."""
    os.environ["TQDM_DISABLE"] = "1"
    sys.stdout.flush()
    os.dup2(2, 1)


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(ORPHAN_EXIT)


def worker_init(silence_stdout: bool = False, parent: int | None = None) -> None:
    """Initialiser of a panel worker process: state for the worker's whole life.

    Hugging Face offline (``offline_hub``); threads pinned to ``WORKER_THREADS`` (never restored:
    the process is the worker's);
    ``silence_stdout``: ``stdout_to_stderr``; ``parent``: the parent's pid, the worker exits when
    that process dies (a record half-written is never left: records are atomic)."""
    offline_hub()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent,), daemon=True, name="panel-parent-watch").start()
    for v in THREAD_VARIABLES:
        os.environ[v] = str(WORKER_THREADS)
    threadpool_limits(limits=WORKER_THREADS)   # BLAS may already be loaded
    require("torch").set_num_threads(WORKER_THREADS)
    if silence_stdout:
        stdout_to_stderr()


# ---- the allocator ------------------------------------------------------------------------------

#: glibc's ``mallopt`` parameters: the size from which a block gets its own mapping, and the
#: free top of the heap kept before it is given back.
_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD = -3, -1


def keep_freed_memory() -> None:
    """Let glibc reuse freed blocks up to 64 MiB instead of unmapping them (for the process's life).

    A bootstrap fit of the study allocates temporaries of about a megabyte, above glibc's default
    mapping threshold, and frees them at once: without this, a fifth of the study's time went to
    the kernel mapping and unmapping them (``research/study_speed.py``). Not glibc: nothing to do.
    Process-wide and not undone (glibc has no getter to restore from): only the study's bootstrap
    calls it, in the process (or worker) that runs the replicates."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 64 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    except (OSError, AttributeError):
        pass


# ---- figures ------------------------------------------------------------------------------------

def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` drawing off-screen (the Agg backend), imported on the first figure.

    The backend is process-wide, and pyplot costs about half a second to import: the modules that
    draw call this when they draw, not at import."""
    importlib.import_module("matplotlib").use("Agg")
    return importlib.import_module("matplotlib.pyplot")


_WORK: ContextVar[Any] = ContextVar("numeric_work_observer", default=None)


@contextlib.contextmanager
def work_observer(observe: Any) -> Iterator[None]:
    """Call ``observe(units)`` for the work every budget spends in the block (``note_work``); a display
    only: what it sees never changes a search, so a bracket is the same with or without it.
    >>> seen = []
    >>> with work_observer(seen.append):
    ...     note_work(3)
    >>> note_work(4); seen
    [3]
    """
    reset = _WORK.set(observe)
    try:
        yield
    finally:
        _WORK.reset(reset)


def note_work(units: int) -> None:
    """Tell the current ``work_observer`` (nothing outside one) that ``units`` of work were spent."""
    observe = _WORK.get()
    if observe is not None:
        observe(units)
