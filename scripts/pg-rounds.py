#!/usr/bin/env python3
"""Where an ingest round's time goes, from PostgreSQL's statement log.

Run the load against a cluster that logs every statement with its duration:
    ALTER SYSTEM SET log_min_duration_statement = 0;
    ALTER SYSTEM SET log_line_prefix = '%m [%p] ';
    SELECT pg_reload_conf();
then:  python3 scripts/pg-rounds.py <postgres.log>

A round is one connection's transaction from BEGIN to COMMIT that calls herald_apply (group
commit: the replies of one lane applied together). Printed: the rounds' mean wall time and the
sum of their statements' execution, the idle time between rounds, the statements that take the
most time per round, the gaps before statements (time in Herald and on the wire between two of
them), and the slowest rounds with their slowest statements.
"""
import re
import statistics
import sys
from datetime import datetime

LINE = re.compile(r'^(\S+ \S+) UTC \[(\d+)\] LOG:  duration: ([\d.]+) ms  (\w+)(?: \S+)?: (.*)$')


def ms(stamp):
    return datetime.strptime(stamp, '%Y-%m-%d %H:%M:%S.%f').timestamp() * 1000


def main(path):
    events = []
    for line in open(path, errors='replace'):
        match = LINE.match(line.rstrip('\n'))
        if match:
            events.append((match.group(1), match.group(2), float(match.group(3)), match.group(4), match.group(5)))
    by_pid = {}
    for event in events:
        by_pid.setdefault(event[1], []).append(event)
    rounds = []
    for pid_events in by_pid.values():
        current = None
        for event in pid_events:
            if event[3] == 'execute' and event[4].startswith('BEGIN'):
                current = [event]
            elif current is not None:
                current.append(event)
                if event[3] == 'execute' and event[4].startswith('COMMIT'):
                    if any('herald_apply' in e[4] for e in current):
                        rounds.append(current)
                    current = None
    rounds.sort(key=lambda r: ms(r[0][0]))
    if not rounds:
        print('no rounds found (is log_min_duration_statement 0?)')
        return
    # the middle three fifths: no warm-up, no tail
    middle = rounds[len(rounds) // 5: len(rounds) * 4 // 5] or rounds
    walls, sums, executes, gaps = [], [], {}, {}
    for r in middle:
        walls.append(ms(r[-1][0]) - ms(r[0][0]) + r[0][2])
        sums.append(sum(e[2] for e in r))
        previous = None
        for e in r:
            key = e[4][:45]
            if e[3] == 'execute':
                executes[key] = executes.get(key, 0) + e[2]
            if previous is not None:
                gaps[key] = gaps.get(key, 0) + max(0, ms(e[0]) - e[2] - ms(previous[0]))
            previous = e
    n = len(middle)
    # idle between consecutive rounds of the middle (a lane's rounds follow each other)
    starts = [ms(r[0][0]) - r[0][2] for r in middle]
    ends = [ms(r[-1][0]) for r in middle]
    idle = [max(0, starts[i + 1] - ends[i]) for i in range(len(middle) - 1)]
    print(f'{len(rounds)} rounds; of the middle {n}: wall {statistics.mean(walls):.2f} ms, '
          f'statements {statistics.mean(sums):.2f} ms; between rounds {statistics.mean(idle) if idle else 0:.2f} ms')
    for key, value in sorted(executes.items(), key=lambda kv: -kv[1])[:10]:
        print(f'  execute {value / n:6.2f} ms  {key}')
    for key, value in sorted(gaps.items(), key=lambda kv: -kv[1])[:6]:
        print(f'  gap before {value / n:6.2f} ms  {key}')
    print('slowest rounds:')
    for r in sorted(rounds, key=lambda r: -(ms(r[-1][0]) - ms(r[0][0])))[:5]:
        top = sorted((e for e in r if e[3] == 'execute'), key=lambda e: -e[2])[:3]
        print(f'  {ms(r[-1][0]) - ms(r[0][0]) + r[0][2]:6.1f} ms at {r[0][0][11:]}: '
              + ', '.join(f'{e[2]:.1f} {e[4][:30]}' for e in top))


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else 'postgres.log')
