#!/usr/bin/env python3
"""The `/v1/me/…` operations of openapi/openapi.json, written from their `/v1/users/{uid}/…` twins.

Herald serves every `/v1/users/{uid}/…` route to user tokens under `/v1/me/…` as well (SPEC §15,
`UserRoutes.mirror`), so the file documents both. This script makes the `/v1/me/…` entries the
way `OpenAPIDocument.withUserMirror` (Swift) derives them: no `uid` or `X-App-Id` parameter, the
`userToken` scheme, the user-token 401 and the 429, and `me…` operation ids. The unit test
`OpenAPIFileTests` checks that the file equals the Swift derivation of itself, so this script and
the Swift code cannot drift apart unnoticed.

  python3 scripts/openapi_me.py          # check: exit 1 when the /v1/me entries are stale or missing
  python3 scripts/openapi_me.py --write  # rewrite them (kept as one block at the end of "paths")
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILE = ROOT / "openapi" / "openapi.json"
USER_PREFIX = "/v1/users/{uid}/"
MIRROR_PREFIX = "/v1/me/"
DROPPED = {"#/components/parameters/Uid", "#/components/parameters/XAppId"}


def mirror(path, item):
    out = {}
    for method, op in item.items():
        if not isinstance(op, dict):
            out[method] = op
            continue
        op = json.loads(json.dumps(op))
        if isinstance(op.get("parameters"), list):
            op["parameters"] = [p for p in op["parameters"] if not (isinstance(p, dict) and p.get("$ref") in DROPPED)]
        if isinstance(op.get("operationId"), str):
            op["operationId"] = "me" + op["operationId"][:1].upper() + op["operationId"][1:]
        description = op.get("description") if isinstance(op.get("description"), str) else ""
        intro = f"With a user token (SPEC §15): `{method.upper()} {path}` for the token's `sub`, same body and answers."
        rest = description.split("\n\nAllowed:")[0]
        op["description"] = intro + ("\n\n" + rest if rest else "") + "\n\nAllowed: user tokens only; API keys and the admin token get 403."
        op["security"] = [{"userToken": []}]
        if isinstance(op.get("responses"), dict):
            op["responses"]["401"] = {"$ref": "#/components/responses/TokenUnauthorized"}
            op["responses"]["429"] = {"$ref": "#/components/responses/TooManyRequests"}
        out[method] = op
    return out


def wanted(document):
    return {MIRROR_PREFIX + path[len(USER_PREFIX):]: mirror(path, item)
            for path, item in document["paths"].items() if path.startswith(USER_PREFIX)}


def main():
    text = FILE.read_text()
    document = json.loads(text)
    expected = wanted(document)
    present = {p: item for p, item in document["paths"].items() if p.startswith(MIRROR_PREFIX)}
    if "--write" not in sys.argv:
        if present == expected:
            print(f"openapi: the {len(expected)} /v1/me operations match their /v1/users twins")
            return 0
        missing = sorted(set(expected) - set(present))
        extra = sorted(set(present) - set(expected))
        stale = sorted(p for p in set(expected) & set(present) if expected[p] != present[p])
        print(f"openapi/openapi.json: /v1/me entries out of date (missing {missing}, extra {extra}, stale {stale});"
              " run python3 scripts/openapi_me.py --write", file=sys.stderr)
        return 1
    lines = text.split("\n")
    # the "  }," closing "paths": the line before the next top-level member ("webhooks", "components")
    start = next(i for i, line in enumerate(lines) if line == '  "paths": {')
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith('  "') and line.endswith('": {')) - 1
    assert lines[end] == "  },", lines[end]
    first = next((i for i, line in enumerate(lines) if line.startswith('    "' + MIRROR_PREFIX)), None)
    if first is None:
        head = lines[:end]
        head[-1] = head[-1] + ","   # the last entry of "paths" gets its comma
    else:
        head = lines[:first]
    block = []
    for path in sorted(expected):
        entry = json.dumps(expected[path], indent=2, ensure_ascii=False).replace("\n", "\n    ")
        block.append(f"    {json.dumps(path)}: {entry}")
    FILE.write_text("\n".join(head + [",\n".join(block)] + lines[end:]))
    json.loads(FILE.read_text())
    print(f"openapi: wrote {len(expected)} /v1/me operations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
