"""The current objects of one resource, kept by list + watch in a background thread (the official client's
Watch), converted to the model as each event arrives (`scaler.kube.cache.ClusterCache` has one per resource).

A watch that ends is resumed from the last resourceVersion seen, a 410 Gone (or an ERROR event) relists,
and a failed connection marks the resource unsynced and retries with bounded, jittered backoff. An
optional resource the API server does not serve (404) is empty and synced, and looked for again every
few minutes.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from scaler.core.config.runtime import Runtime
from scaler.kube.convert import SnapshotError
from scaler.kube.view import IndexView, PodIndex, index_of

log = logging.getLogger("scaler.kube.cache")
JSON = dict[str, Any]
_NAMING = ("name", "namespace", "uid", "resourceVersion")  # the metadata a slim Informer keeps
DEFAULTS = Runtime()  # the watches' timings when the caller sets none (`scaler run` sets the config's)


class Informer:
    """The current objects of one resource, kept by list + watch in a background thread."""

    def __init__(self, kind: str, list_fn: Callable[..., Any], *, watch_timeout: int = DEFAULTS.watch_timeout,
                 backoff_initial: float = DEFAULTS.watch_backoff_initial,
                 backoff_max: float = DEFAULTS.watch_backoff_max, page_size: int = DEFAULTS.page_size,
                 absent_recheck: float = DEFAULTS.absent_recheck,
                 optional: bool = False, convert: Callable[[JSON], Any] | None = None, slim: bool = False,
                 index: bool = False) -> None:
        """`optional`: a 404 (the API server does not serve the resource) is an empty, synced resource.
        `convert`: each object is converted as its event arrives (what it returns, or the SnapshotError it
        raises, is kept beside the object: `models`); an object whose resourceVersion did not change is not
        converted again. `slim`: of an object that converted only the metadata that names it is kept (`items`
        gives that), the model holds what the passes read (a pod's JSON is several times its model). `index`
        (pods): the converted pods are also kept sorted as a pass's view takes them (`view`)."""
        self.kind = kind
        self._convert = convert
        self._slim = slim and convert is not None
        self._models: dict[str, Any] = {}
        self._index = PodIndex() if index and convert is not None else None
        self.optional = optional
        self._list_fn = list_fn
        self._watch_timeout = watch_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._page_size = page_size
        self._absent_recheck = absent_recheck
        self._lock = threading.Lock()
        self._objects: dict[str, JSON] = {}
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.relists = 0
        self.errors = 0

    # --- reading ----------------------------------------------------------------------------
    def items(self) -> list[JSON]:
        with self._lock:
            return list(self._objects.values())

    def models(self) -> list[tuple[Any, JSON]]:
        """(the converted object or the SnapshotError its conversion raised, the object), in `items` order."""
        with self._lock:
            return [(self._models[k], obj) for k, obj in self._objects.items()]

    def view(self) -> IndexView:
        """The converted pods as a pass's view takes them (an informer made with `index`)."""
        assert self._index is not None
        with self._lock:
            return self._index.view()

    def _kept(self, obj: JSON, model: Any) -> JSON:
        """What is kept of the object: all of it, or (slim) the metadata naming it when it converted (one
        that did not is kept whole, for the pass to report)."""
        if not self._slim or isinstance(model, SnapshotError):
            return obj
        meta = obj.get("metadata") or {}
        return {"metadata": {k: meta[k] for k in _NAMING if k in meta}}

    def _model(self, obj: JSON, before: JSON | None, model: Any) -> Any:
        """The converted object: the one kept for `before` when it is the same version of the object."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if before is not None and rv and (before.get("metadata") or {}).get("resourceVersion") == rv:
            return model
        try:
            return self._convert(obj)  # type: ignore[misc]
        except SnapshotError as err:
            return err

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self, wait: float = 0.5) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()  # type: ignore[no-untyped-call]
        if self._thread is not None and wait > 0:
            self._thread.join(timeout=wait)  # a daemon: a watch blocked in a read ends with the process

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            just_listed = False
            try:
                if self.resource_version is None:
                    self._relist()
                    just_listed = True  # a 410 on a version the server just gave us: back off, do not spin
                self._watch_once()
                failures = 0
            except ApiException as err:
                if err.status == 410 and not just_listed:  # Gone: our version was compacted away; relist now
                    log.info("watch %s expired (410 Gone), relisting", self.kind)
                    self.resource_version = None
                    continue
                if err.status == 404 and self.optional:
                    self._absent()
                    continue
                if self._stop.is_set():
                    return
                failures = self._failed(failures, f"HTTP {err.status}: {err.reason}")
            except Exception as err:
                if self._stop.is_set():  # stopped: the watch's end (its connection closed under it) is no failure
                    return
                failures = self._failed(failures, f"{err.__class__.__name__}: {err}")

    def _absent(self) -> None:
        if not self.synced.is_set() or self._objects:
            log.info("%s: not served by the API server (404); empty until it is", self.kind)
        with self._lock:
            self._objects, self._models = {}, {}
            if self._index is not None:
                self._index = PodIndex()
        self.resource_version = None
        self.synced.set()
        self._stop.wait(self._absent_recheck)

    def _failed(self, failures: int, why: str) -> int:
        self.synced.clear()
        self.resource_version = None  # events may have been missed: relist on reconnect
        self.errors += 1
        delay = min(self._backoff_max, self._backoff_initial * 2 ** failures)
        delay *= random.uniform(0.8, 1.2)  # noqa: S311 -- jitter, not cryptography
        log.warning("%s cache: %s; retrying in %.1fs", self.kind, why, delay)
        self._stop.wait(delay)
        return failures + 1

    def _relist(self) -> None:
        objects: dict[str, JSON] = {}
        cont: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": self._page_size, "_preload_content": False}
            if cont:
                kwargs["_continue"] = cont
            resp = self._list_fn(**kwargs)
            body = json.loads(resp.data)
            for obj in body.get("items") or ():
                objects[key_of(obj)] = obj
            meta = body.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                break
        models: dict[str, Any] = {}
        if self._convert is not None:
            for k, obj in objects.items():
                models[k] = self._model(obj, self._objects.get(k), self._models.get(k))
                objects[k] = self._kept(obj, models[k])
        index = index_of((k, models[k], obj) for k, obj in objects.items()) if self._index is not None else None
        with self._lock:
            self._objects, self._models, self._index = objects, models, index
        self.resource_version = str(meta.get("resourceVersion"))
        self.relists += 1
        self.synced.set()
        log.debug("%s cache: listed %d at resourceVersion %s", self.kind, len(objects), self.resource_version)

    def _watch_once(self) -> None:
        self._watch = RawWatch()  # type: ignore[no-untyped-call]
        stream = self._watch.stream(  # type: ignore[no-untyped-call]
            self._list_fn, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout, _request_timeout=(10, self._watch_timeout + 30),
        )
        # The client raises ApiException(410) for an expired resourceVersion (no retry: timeout given).
        for event in stream:
            kind, obj = event["type"], event["raw_object"]
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise ApiException(status=code, reason=obj.get("message", ""))
            self.apply(kind, obj)
            if self._stop.is_set():
                break


    def apply(self, kind: str, obj: JSON) -> None:
        """One watch event (ADDED, MODIFIED, DELETED; BOOKMARK only moves the resourceVersion)."""
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        key = key_of(obj)
        if kind in ("ADDED", "MODIFIED"):
            if self._convert is not None:  # converted here, in the watch's thread, not by the pass
                model = self._model(obj, self._objects.get(key), self._models.get(key))
                obj = self._kept(obj, model)
            with self._lock:
                self._objects[key] = obj
                if self._convert is not None:
                    self._models[key] = model
                if self._index is not None:
                    self._index.put(key, model, obj)
        elif kind == "DELETED":
            with self._lock:
                self._objects.pop(key, None)
                self._models.pop(key, None)
                if self._index is not None:
                    self._index.delete(key)
        if rv:
            self.resource_version = str(rv)


class RawWatch(watch.Watch):
    """Watch events with the API's JSON only: the client's models validate each object as it arrives, and one
    malformed object would end the watch for all of them (the conversion skips it alone, with a reason)."""

    def get_return_type(self, func: Callable[..., Any]) -> None:
        return None


def key_of(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
