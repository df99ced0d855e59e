"""The event loop a blocking store runs its work on, in a daemon thread of its own.

:class:`LoopThread` starts the loop, runs each coroutine there and waits for
its answer (from any thread), and closes the store and stops the loop when the
store is closed or collected; :func:`iterate` drives one of the store's async
iterators from the caller's thread, a batch a hop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from loopctl_memory.errors import LoopMemoryError, StorageError
from loopctl_memory.sql.database.unit_of_work import forked_error
from loopctl_memory.sql.store.memory_store import SqlMemoryStore

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread of its own, shared by a store and its views."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # Held while checking `closed` and submitting work: once closed, nothing more
        # reaches the loop, so no coroutine is left un-awaited on a stopped loop.
        self._lock = threading.Lock()
        self.closed = False
        self.describe = "?"  # the store's target, once opened: for the "closed" error
        self.started_in = os.getpid()  # a fork()ed child has no such thread
        # A daemon: an unclosed store must never keep the interpreter from exiting.
        self.thread = threading.Thread(target=self._serve, name="loopctl-memory-loop", daemon=True)
        try:
            self.thread.start()
        except BaseException:  # no thread to run it: nothing else will close the loop
            self.loop.close()
            raise

    def _serve(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                # Work still running when the store closed (another thread's call)
                # ends here: cancelled, and its caller told the store is closed.
                leftovers = asyncio.all_tasks(loop)
                for task in leftovers:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                # The store's asyncio.to_thread workers (a consolidation pass): joined.
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop itself (where waiting for it would deadlock)."""
        return threading.current_thread() is self.thread

    def closed_error(self) -> StorageError:
        """The error the async store raises once closed."""
        return StorageError(f"the store at {self.describe} is closed")

    def _submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """``work`` scheduled on the loop (closed unawaited, and an error, where it cannot be)."""
        if self.in_loop_thread():
            work.close()
            raise RuntimeError("a store cannot be called from its own event loop")
        if os.getpid() != self.started_in:
            work.close()
            raise forked_error(self.describe, self.started_in)
        with self._lock:
            if self.closed:
                work.close()  # never awaited: closed here, so asyncio does not warn of it
                raise self.closed_error()
            return asyncio.run_coroutine_threadsafe(work, self.loop)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop and wait for its result (or its exception, unchanged).

        Raises:
            StorageError: the store is closed (also when it closed while ``work`` ran).
            RuntimeError: called from the loop's own thread (a ``clock`` calling the store).

        """
        future = self._submit(work)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self.closed:  # cancelled by close() in another thread
                raise self.closed_error() from None
            raise
        finally:
            # A no-op once done. A caller interrupted while waiting (KeyboardInterrupt)
            # stops the work: the store rolls its transaction back.
            future.cancel()

    async def arun(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop and await its result from another event loop.

        Cancelling the caller cancels ``work``. Raises as :meth:`run` does.
        """
        future = self._submit(work)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if self.closed and future.cancelled():
                raise self.closed_error() from None
            raise

    def close(self, store: SqlMemoryStore | None) -> None:
        """Close ``store`` on the loop, stop the loop and join its thread. Idempotent.

        A second caller (another thread) returns once the first has finished.
        """
        if self.in_loop_thread():
            raise RuntimeError("a SyncMemoryStore cannot be closed from its own event loop")
        with self._lock:
            first = not self.closed
            self.closed = True
        if os.getpid() != self.started_in:
            return  # the loop and the connections are the parent's: nothing to stop here
        if not first:
            self.thread.join()
            return
        try:
            if store is not None:
                asyncio.run_coroutine_threadsafe(store.close(), self.loop).result()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()

    def abandon(self, store: SqlMemoryStore) -> None:
        """Release a store nobody closed (garbage-collected): as :meth:`close`, never raising."""
        if sys.is_finalizing():
            return  # the loop thread can no longer run; as a daemon it ends with the process
        if not self.in_loop_thread():
            with contextlib.suppress(LoopMemoryError):
                self.close(store)
            return
        # Collected on the loop's own thread: it cannot wait for itself, so it closes
        # the store and stops as its next piece of work, and the thread then ends.
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.loop.create_task(_close_then_stop(store, self.loop))


async def _close_then_stop(store: SqlMemoryStore, loop: asyncio.AbstractEventLoop) -> None:
    try:
        with contextlib.suppress(LoopMemoryError):
            await store.close()
    finally:
        loop.stop()


async def _take(iterator: AsyncIterator[T], size: int) -> tuple[list[T], bool]:
    """Up to ``size`` items of ``iterator``, and whether it may have more."""
    taken: list[T] = []
    try:
        while len(taken) < size:
            taken.append(await iterator.__anext__())
    except StopAsyncIteration:
        return taken, False
    return taken, True


def iterate(
    runner: LoopThread, make: Callable[[], AsyncIterator[T]], batch_size: object
) -> Iterator[T]:
    """Drive an async iterator of the store on its loop, one hop a batch."""
    # A bad batch_size gets one item a hop, so the first hop raises the store's own error.
    hop = batch_size if type(batch_size) is int and batch_size >= 1 else 1
    iterator: AsyncIterator[T] | None = None
    more = True
    try:
        while more:
            if iterator is None:
                iterator = make()  # made here: on first next(), as an async iterator starts
            batch, more = runner.run(_take(iterator, hop))
            yield from batch
    finally:
        # Stopped early (close(), break, an error): close the async generator on the
        # loop now. Not possible once the store is closed, nor from the loop's own
        # thread; the loop's shutdown or its async-generator hooks close it then.
        if (
            more
            and isinstance(iterator, AsyncGenerator)
            and not runner.closed
            and not runner.in_loop_thread()
        ):
            with contextlib.suppress(StorageError):  # closed meanwhile: see above
                runner.run(iterator.aclose())
