"""The subject workload as a raw ASGI 3 app. Contract: ../spec.md."""

from arena.subjects.python.workload import async_parts, run_async, wire_headers


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:  # drain the request body: the contract ignores it
        more = (await receive()).get("more_body", False)
    request_start = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-start"), None)
    resp = await run_async(scope["path"], scope["query_string"].decode("latin-1"), request_start, "asgi")
    await send({"type": "http.response.start", "status": resp.status,
                "headers": [(k.lower().encode(), v.encode()) for k, v in wire_headers(resp)]})
    if resp.stream is None:
        await send({"type": "http.response.body", "body": resp.body})
        return
    async for part in async_parts(resp.stream):
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
