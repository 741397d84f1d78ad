"""What a session lists besides tools, and how it hears of changes: resources and prompts (`Resources`,
`Prompts`), list-changed announcements (`ChangeNotifier`), 2026-era listen streams (`ListenStreams`),
promotion (`Promoter`) and the extensions and cache hints it is told (`ExtensionsAdvertiser`, `list_hint`).
"""

from proxy.downstream.lists._advertising import ExtensionsAdvertiser, list_hint
from proxy.downstream.lists._listen_streams import ListenStreams
from proxy.downstream.lists._notifier import LIST_CHANGED, ChangeNotifier, Kind
from proxy.downstream.lists._promotion import Promoter
from proxy.downstream.lists._prompts import Prompts
from proxy.downstream.lists._resources import Resources, ViewOf

__all__ = [
    "LIST_CHANGED",
    "ChangeNotifier",
    "ExtensionsAdvertiser",
    "Kind",
    "ListenStreams",
    "Promoter",
    "Prompts",
    "Resources",
    "ViewOf",
    "list_hint",
]
