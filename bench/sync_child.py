"""One sync measurement in a fresh process; prints one JSON line.

    python -m bench.sync_child MODE URL TOKEN CA [--tracemalloc]

MODE:
  raw       the informer's first request (GET /api/v1/pods?resourceVersion=0&limit=500),
            bytes read only: the transfer floor
  ours      informer_core's factory syncing pods (managedFields stripped, as the gateway)
  official  the kubernetes package's own kubernetes.informer.SharedInformer
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def api_client(url: str, token: str, ca: str):
    from kubernetes import client

    config = client.Configuration()
    config.host = url
    config.ssl_ca_cert = ca
    config.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(config)


def main() -> None:
    mode, url, token, ca = sys.argv[1:5]
    trace = "--tracemalloc" in sys.argv
    import orjson  # noqa: F401 - imported before the baseline, like everything else

    from app.main import strip_managed_fields  # the gateway's own transform

    from informer_core.discovery import GroupVersionResource
    from informer_core.factory import SharedInformerFactory
    from informer_core.rest import RawClient

    client = api_client(url, token, ca)
    gc.collect()
    if trace:
        import tracemalloc

        tracemalloc.start()
    rss0 = rss_bytes()
    result: dict = {"mode": mode}
    started = time.perf_counter()

    if mode == "raw":
        raw = RawClient(client)
        call = raw.new_call()
        response = raw.open(call, "/api/v1/pods", {"resourceVersion": "0", "limit": "500"}, 300)
        body = response.read()
        call.close()
        result["seconds"] = time.perf_counter() - started
        result["bytes"] = len(body)
        items = orjson.loads(body)["items"]
        result["objects"] = len(items)
        result["stripped_bytes"] = sum(len(orjson.dumps(strip_managed_fields(i))) for i in items)
    elif mode == "ours":
        factory = SharedInformerFactory(client, transform=strip_managed_fields)
        generic = factory.for_resource(GroupVersionResource("", "v1", "pods"))
        stop = threading.Event()
        factory.start(stop)
        factory.wait_for_cache_sync(stop)
        result["seconds"] = time.perf_counter() - started
        indexer = generic.informer().get_indexer()
        result["objects"] = len(indexer)
        result["stripped_bytes"] = sum(len(o.raw) for o in indexer.list_encoded())
        gc.collect()
        result["rss_growth"] = rss_bytes() - rss0
        if trace:
            import tracemalloc

            result["traced_bytes"] = tracemalloc.get_traced_memory()[0]
        stop.set()
        factory.shutdown()
    elif mode == "official":
        from kubernetes import client as k8s
        from kubernetes.informer import SharedInformer

        count = [0]
        done = threading.Event()
        expected = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5].isdigit() else 10_000

        def on_add(_obj):
            count[0] += 1
            if count[0] >= expected:
                done.set()

        informer = SharedInformer(list_func=k8s.CoreV1Api(client).list_pod_for_all_namespaces)
        informer.add_event_handler("ADDED", on_add)
        informer.start()
        done.wait(600)
        result["seconds"] = time.perf_counter() - started
        result["objects"] = count[0]
        gc.collect()
        result["rss_growth"] = rss_bytes() - rss0
        if trace:
            import tracemalloc

            result["traced_bytes"] = tracemalloc.get_traced_memory()[0]
        informer._stop_event.set()
        if informer._watch is not None:
            informer._watch.stop()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(result), flush=True)
    os._exit(0)  # do not wait for the official informer's blocked watch thread


if __name__ == "__main__":
    main()
