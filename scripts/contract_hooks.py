"""Schemathesis hooks for scripts/contract-test.sh (loaded through SCHEMATHESIS_HOOKS).

- Path parameters: half of the generated uids, guids and message ids (fuzzing phase) are ones
  contract_seed.py created, so that threads, subscriptions, read marks and routing decisions
  answer 200 and their bodies are checked against the document, not only their 404s. Admin
  routes get the contract app's id (HERALD_CONTRACT_APP) the same way.
- X-App-Id: an app key naming any other app is 403 before anything else is looked at, so three
  in four generated values are replaced by the contract app's own id (the rest stay, and keep
  the 403 checked); otherwise most requests would test nothing but that 403.
- POST /v1/jobs/claim long-polls: with no job ready it answers only after `waitSeconds` (0-30),
  and the run would spend most of its time asleep. A wait of 2-30 s is sent as 1 s: the
  long-poll path still runs and answers. Values outside 0-30, and other types, are sent as
  generated, so the 400 for them is still checked.
"""
import itertools
import os
import re
import sys
import zlib

import schemathesis
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract_seed  # noqa: E402

KNOWN = {
    "uid": contract_seed.UIDS,
    "guid": contract_seed.GUIDS,
    "messageId": contract_seed.MESSAGES,
    "app": [os.environ["HERALD_CONTRACT_APP"]] if os.environ.get("HERALD_CONTRACT_APP") else [],
}


@schemathesis.hook
def before_generate_path_parameters(context, strategy):
    names = re.findall(r"{([^}]+)}", context.operation.path)
    if not names or any(not KNOWN.get(name) for name in names):
        return strategy
    known = [dict(zip(names, values)) for values in itertools.product(*(KNOWN[name] for name in names))]
    return st.one_of(strategy, st.sampled_from(known))


@schemathesis.hook
def before_call(context, case, kwargs):
    app = os.environ.get("HERALD_CONTRACT_APP")
    headers = case.headers or {}
    for name in [name for name in headers if name.lower() == "x-app-id"]:
        if app and zlib.crc32(repr(headers[name]).encode()) % 4 != 0:
            headers[name] = app
    if case.operation.path != "/v1/jobs/claim" or not isinstance(case.body, dict):
        return
    wait = case.body.get("waitSeconds")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and 1 < wait <= 30:
        case.body["waitSeconds"] = 1
