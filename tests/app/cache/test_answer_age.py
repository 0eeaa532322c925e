"""When a cache is not following the API server, and what its answers then say."""

from __future__ import annotations

from app.cache.answer_age import HEARTBEAT_EVERY, stale_since, staleness_headers, warning_header
from informer_core.reflector import ReflectorStats

NOW = 1_800_000_000.0


def stats(**kw) -> ReflectorStats:
    return ReflectorStats(**kw)


def test_a_cache_watching_a_server_that_answers_is_current():
    assert stale_since(stats(watching=True), confirmed_at=NOW - 1, now=NOW) is None
    assert stale_since(None, confirmed_at=0.0, now=NOW) is None  # not started: nothing to say


def test_a_cache_whose_watch_ended_is_current_until_it_ended():
    assert stale_since(stats(watching=False, unwatched_since=NOW - 42), NOW, now=NOW) == NOW - 42
    # the moment between a list and its watch, or a watch being reopened, is not staleness
    assert stale_since(stats(watching=False, last_event_time=NOW - 0.5), NOW, now=NOW) is None
    assert stale_since(stats(watching=False, unwatched_since=NOW - 1), NOW, now=NOW) is None


def test_an_open_watch_on_a_silent_server_is_current_until_the_server_last_answered():
    within = NOW - HEARTBEAT_EVERY  # a missed beat is not yet staleness
    assert stale_since(stats(watching=True), confirmed_at=within, now=NOW) is None
    long_ago = NOW - 60
    assert stale_since(stats(watching=True), confirmed_at=long_ago, now=NOW) == long_ago


def test_the_headers_say_how_old_in_seconds_and_in_words():
    headers = staleness_headers("pods", NOW - 42.7, now=NOW)
    assert headers["Age"] == "42"
    assert headers["Warning"].startswith('299 - "kube-cache-gateway: the cache of pods has not '
                                         'followed the API server since 2027-01-15T07:59:17Z;')
    assert headers["Warning"].endswith('this answer may be 42 s old"')


def test_with_several_clusters_the_warning_names_the_cluster():
    headers = staleness_headers("pods", NOW - 5, now=NOW, cluster="prod")
    assert headers["Warning"].startswith('299 - "cluster prod: the cache of pods has not followed')


def test_warnings_are_quoted_one_by_one_and_cut_short():
    value = warning_header(['cluster b: said "no"', "x" * 1000])
    assert value == '299 - "cluster b: said \\"no\\"", 299 - "' + "x" * 300 + '"'
