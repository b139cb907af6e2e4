"""The example's data (../schema.sql), once for all workers: an advisory lock, an idempotent script.
Run in its own thread: an ASGI server imports the app inside its event loop, where Django refuses
to block on the database; the thread's connection is closed after."""

import threading
from pathlib import Path

from django.db import connection

SCHEMA = Path(__file__).resolve().parent.parent.parent / "schema.sql"


def seed() -> None:
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with connection.cursor() as c:
                c.execute("SELECT pg_advisory_lock(72707)")
                try:
                    c.execute(SCHEMA.read_text())
                finally:
                    c.execute("SELECT pg_advisory_unlock(72707)")
        except BaseException as e:  # raised again in the importing thread
            failed.append(e)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
