"""The app's own Server-Timing metric (kept by Arena's timing around it): time in SQL, every query
through Django's connection."""

import time

from django.db import connection


class ServerTiming:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        spent = {"sql": 0.0}

        def timed(execute, sql, params, many, context):
            start = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                spent["sql"] += (time.perf_counter() - start) * 1000

        with connection.execute_wrapper(timed):
            response = self.get_response(request)
        response["Server-Timing"] = ", ".join(f"{name};dur={ms:.3f}" for name, ms in spent.items())
        return response
