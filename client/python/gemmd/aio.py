"""asyncio: gemmd.aio.Client, the same API as gemmd.Client with awaitable calls.

    async with gemmd.aio.Client("localhost:50051") as c:
        d = await c.gemm(x, "layer0")
        ds = await asyncio.gather(*(c.gemm(x, "layer0") for x in xs))  # batched by gemmd

GEMMs are the synchronous client's futures (grpcio's or the shared-memory completion
thread's), awaited without a thread each; the rarer calls (weights, stats) run in the
loop's default executor.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from . import client as _client
from ._types import HealthStatus, WeightInfo

__all__ = ["Client"]


class Client:
    """gemmd.Client with coroutines; the same arguments (see gemmd.Client)."""

    def __init__(self, target: str, **kwargs: Any):
        self.sync = _client.Client(target, **kwargs)

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))

    async def gemm(self, a: Any, weight: Any, **kwargs: Any) -> Any:
        """Awaitable Client.gemm (same arguments)."""
        return await asyncio.wrap_future(self.sync.gemm_async(a, weight, **kwargs))

    async def register_weight(self, name: str, array: Any, scales: Any = None, layout: Any = None,
                              **kwargs: Any) -> WeightInfo:
        return await self._run(self.sync.register_weight, name, array, scales, layout, **kwargs)

    async def unregister_weight(self, weight: Any, **kwargs: Any) -> None:
        await self._run(self.sync.unregister_weight, weight, **kwargs)

    async def weight(self, weight: Any, **kwargs: Any) -> WeightInfo:
        return await self._run(self.sync.weight, weight, **kwargs)

    async def weights(self, **kwargs: Any) -> list[WeightInfo]:
        return await self._run(self.sync.weights, **kwargs)

    async def stats(self, **kwargs: Any) -> Any:
        return await self._run(self.sync.stats, **kwargs)

    async def health(self, service: str = "", **kwargs: Any) -> HealthStatus:
        return await self._run(self.sync.health, service, **kwargs)

    def stream(self, **kwargs: Any) -> "GemmStream":
        return GemmStream(self.sync.stream(**kwargs))

    async def close(self) -> None:
        await self._run(self.sync.close)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class GemmStream:
    """gemmd.GemmStream whose submit() returns an awaitable asyncio future."""

    def __init__(self, sync: Any):
        self.sync = sync

    def submit(self, a: Any, weight: Any, **kwargs: Any) -> "asyncio.Future[Any]":
        return asyncio.wrap_future(self.sync.submit(a, weight, **kwargs))

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.sync.close)

    async def __aenter__(self) -> "GemmStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


