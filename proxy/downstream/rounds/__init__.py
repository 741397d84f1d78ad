"""A downstream call's way back: the handshake era's `SessionChannel`, the 2026 era's input rounds
(`RoundTrips`, with sealed `RequestStates`), the one of them a request's era has (`WayBack`), and the log
messages each session takes (`SessionLogs`).
"""

from proxy.downstream.rounds._input_rounds import RoundTripChannel, RoundTrips
from proxy.downstream.rounds._request_state import RequestStates
from proxy.downstream.rounds._session_channel import SessionChannel
from proxy.downstream.rounds._session_logs import SessionLogs
from proxy.downstream.rounds._way_back import WayBack

__all__ = [
    "RequestStates",
    "RoundTripChannel",
    "RoundTrips",
    "SessionChannel",
    "SessionLogs",
    "WayBack",
]
