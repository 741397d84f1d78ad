"""The operator's console at `/ui`: the fleet live, each server's tools and pending approvals, what each
profile's client gets, the search ranker with its reasons, and the audit log, as server-rendered pages."""

from proxy.console._app import Console, ConsoleSources

__all__ = ["Console", "ConsoleSources"]
