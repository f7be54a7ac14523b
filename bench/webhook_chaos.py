"""Chaos for webhooks: every notification owed arrives while the receiver goes down and the dispatcher is killed.

    python -m bench.webhook_chaos [--sessions 6] [--tasks 6] [--graphs 6] [--receiver-outages 12]
                                  [--dispatcher-kills 8] [--chaos-seconds 90] [--seed N] [--deadline SECONDS]

A dev server, a SQLite store and a worker with the scripted model (``bench.local``) run sessions,
autonomous tasks and task graphs, each watched by the webhook dispatcher as soon as it starts
(``bench/_webhook_chaos_harness.py`` says what each does and which notifications it owes). The
dispatcher runs in a process of its own (``bench._webhook_dispatcher``: the gateway's
``WebhookDispatcher``, retrying every 0.2-1 s) and posts to a receiver on loopback
(``bench/_webhook_receiver.py``) that checks each signature and records each request. Over
``--chaos-seconds``, the receiver is taken down ``--receiver-outages`` times (0.5-2.5 s each; a
request in hand when it goes down gets no answer) and the dispatcher SIGKILLed ``--dispatcher-kills``
times (started again 0.2-1 s later), at random moments of the seeded run.

When the work has ended, the receiver is up and a dispatcher runs until every watch has ended and
no delivery is pending. Then what the store's event logs say was owed (every session's turn ends
and approval requests, every status event of a task or graph, each under the id its notification
must carry) is compared with the ids the receiver took. The last line is exactly

    webhook_chaos watches=.. notifications=.. receiver_outages=.. dispatcher_kills=.. missing=..
        duplicated=.. unexpected=.. failed=.. unended=.. repeats=.. repeats_unanswered=.. repeats_answered=..

(one line): ``missing`` owed ids never received; ``duplicated`` one owed notification received under
two ids; ``unexpected`` ids nothing owes; ``failed`` deliveries given up; ``unended`` watches still
open. ``repeats`` counts the receiver-side repeats of one id, which at-least-once delivery allows:
``repeats_unanswered`` after the receiver went down holding the earlier request unanswered, and
``repeats_answered`` after an answered request the dispatcher was killed before recording.

Exit status 0 when missing, duplicated, unexpected, failed and unended are all 0, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from bench._cli import print_progress, quiet_sdk_logs
from bench._webhook_chaos_harness import WebhookChaosReport, run_webhook_chaos

__all__ = ["WebhookChaosReport", "main", "run_webhook_chaos"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook_chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=6, help="watched sessions, 3 notifications each (default 6)")
    parser.add_argument("--tasks", type=int, default=6, help="watched autonomous tasks, 5 statuses each (default 6)")
    parser.add_argument("--graphs", type=int, default=6, help="watched task graphs, 4 or 5 statuses each (default 6)")
    parser.add_argument("--receiver-outages", type=int, default=12, help="times the receiver goes down (default 12)")
    parser.add_argument("--dispatcher-kills", type=int, default=8, help="SIGKILLs of the dispatcher process (default 8)")
    parser.add_argument("--chaos-seconds", type=float, default=90.0, help="how long the chaos lasts (default 90)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the start order and the chaos moments (default 1)")
    parser.add_argument("--deadline", type=float, default=None, help="overall bound in seconds (default: chaos + 180)")
    args = parser.parse_args(argv)
    quiet_sdk_logs()
    report = asyncio.run(
        run_webhook_chaos(
            sessions=args.sessions, tasks=args.tasks, graphs=args.graphs, receiver_outages=args.receiver_outages,
            dispatcher_kills=args.dispatcher_kills, seed=args.seed, chaos_seconds=args.chaos_seconds,
            deadline_seconds=args.deadline or args.chaos_seconds + 180.0, progress=print_progress,
        )
    )
    for problem in report.problems:
        print("problem:", problem)
    print(f"received={report.received} unanswered={report.unanswered} rejected={report.rejected}")
    print(report.line(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
