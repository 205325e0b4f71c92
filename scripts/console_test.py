"""The operator console (SPEC §16) in a real headless Chromium, driven by Playwright, against the
live server (scripts/contract-test.sh runs it after schemathesis).

Through the page only: sign in with a server key, change a default and see it through the API,
see an API validation error at its field, restore defaults after the confirmation; look up a user
and see an inbox row with its level, which preferences are the user's, and an explain result; set,
change, page through and remove the user's conversation levels, and see a refused one's error at
the form; watch the queue,
requeue a dead job and see a rejected event; sign in with the admin token, create an app and a
key (the secret shown once) and revoke it; in an app of its own, direct delivery (SPEC §13.4): an
APNs block with a P-256 key and an FCM block with a service account, whose keys are sent once and
never shown again, a refused block's error at its field, the Web Push key pair made, a block
removed after the confirmation; the same page in a narrow window. Throughout: no
request leaves the server's origin, no script error, no Content-Security-Policy violation.
Screenshots of each page go to .build/console-screenshots/.

Usage: console_test.py BASE_URL ADMIN_TOKEN CHROMIUM
"""
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from playwright.sync_api import expect, sync_playwright

BASE, ADMIN, CHROMIUM = sys.argv[1], sys.argv[2], sys.argv[3]
SHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "console-screenshots")


def call(method, path, token, body=None, headers=None, content_type="application/json"):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method, headers={
        "Authorization": "Bearer " + token, **({"Content-Type": content_type} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read().decode() or "null")


def check(condition, message):
    if not condition:
        sys.exit("console: " + message)


def setup():
    """An app with a server, ingest and worker key, a thread with a mention, a dead job, a
    rejected event, a track-only thread of carol's and a group she is not in, all through the API."""
    app = "console-" + os.urandom(4).hex()
    check(call("POST", "/v1/apps", ADMIN, {"id": app})[0] == 201, "creating the app")
    keys = {}
    for role in ["server", "ingest", "worker"]:
        status, body = call("POST", "/v1/apps/%s/keys" % app, ADMIN, {"role": role})
        check(status == 201, "creating the %s key" % role)
        keys[role] = body["key"]
    now = int(time.time() * 1000)

    def event(eid, kind, data):
        return {"specversion": "1.0", "id": eid, "source": "console", "type": kind, "data": data}

    def message(eid, mid, sender, at, text, parent=None, mentions=()):
        data = {"id": mid, "sender": sender, "sentAt": at, "text": text, "mentions": list(mentions),
                "receiverType": "group", "receiver": "g1"}
        if parent:
            data["parentId"] = parent
        return event(eid, "message.created", data)

    events = [event("j-" + uid, "member.joined", {"guid": "g1", "uid": uid, "at": now - 120_000}) for uid in ["alice", "bob", "carol"]]
    events += [message("e1", "m1", "bob", now - 60_000, "Release plan?"),
               message("e2", "m2", "alice", now - 30_000, "ping <@uid:carol>", parent="m1", mentions=["carol"]),
               {"specversion": "1.0", "id": "bad-1", "source": "console", "type": "message.created", "data": {"id": "x"}}]
    # 24 more threads carol is mentioned in, older than m1: her inbox has two pages of 20.
    for n in range(24):
        events.append(message("t%d" % n, "t%d" % n, "bob", now - 110_000 + n * 1000, "topic %d" % n))
        events.append(message("tr%d" % n, "tr%d" % n, "alice", now - 109_500 + n * 1000, "see <@uid:carol>", parent="t%d" % n, mentions=["carol"]))
    status, body = call("POST", "/v1/events", keys["ingest"], events, content_type="application/cloudevents-batch+json")
    check(status == 200 and body["accepted"] == 53 and body["rejected"] == 1, "seeding events: %s" % body)
    check(call("PUT", "/v1/users/carol/devices/phone", keys["server"], {"platform": "apns", "token": "carol-apns-token-0001"})[0] == 200,
          "carol's device")
    check(call("PATCH", "/v1/users/carol/preferences", keys["server"],
               {"groupPreferences": {"messages": "SUBSCRIBE_TO_MENTIONS"}})[0] == 200, "carol's preference")
    status, claimed = call("POST", "/v1/jobs/claim", keys["worker"], {"max": 1})
    check(status == 200 and claimed["jobs"], "claiming a job")
    job = claimed["jobs"][0]
    status, _ = call("POST", "/v1/jobs/fail", keys["worker"],
                     {"jobs": [{"id": job["id"], "attempt": job["attempt"], "error": "APNs said BadDeviceToken", "retryable": False}]})
    check(status == 200 and call("GET", "/v1/jobs/stats", keys["worker"])[1]["dead"] == 1, "making a dead job")
    # SPEC §18: carol keeps t10 without pushes; g2 is a group of alice's that carol is not in.
    status, body = call("PUT", "/v1/users/carol/threads/t10/subscription", keys["server"], {"level": "track"})
    check(status == 200 and body["level"] == "track", "carol tracks t10: %s" % body)
    joined = event("j-alice-g2", "member.joined", {"guid": "g2", "uid": "alice", "at": now - 60_000})
    status, body = call("POST", "/v1/events", keys["ingest"], [joined], content_type="application/cloudevents-batch+json")
    check(status == 200 and body["accepted"] == 1, "alice joins g2: %s" % body)
    return app, keys, job["id"]


def pkcs8(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


def direct_delivery(browser, requests, problems):
    """SPEC §13.4 through the page, in an app of its own (with no jobs, so nothing is sent): mode
    direct with an APNs block, its key write-only; an FCM block from a service account's JSON; the
    Web Push key pair; removing a block."""
    app = "console-direct-" + os.urandom(3).hex()
    check(call("POST", "/v1/apps", ADMIN, {"id": app})[0] == 201, "creating the direct-delivery app")
    status, body = call("POST", "/v1/apps/%s/keys" % app, ADMIN, {"role": "server"})
    check(status == 201, "its server key")
    server = body["key"]
    apns_pem = pkcs8(ec.generate_private_key(ec.SECP256R1()))
    rsa_pem = pkcs8(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    # Lines of the keys' base64 bodies: none may ever be in the page once saved.
    secret_lines = [line for pem in (apns_pem, rsa_pem) for line in pem.splitlines()[1:-1]]
    account = {"type": "service_account", "project_id": "herald-console", "private_key_id": "k1", "private_key": rsa_pem,
               "client_email": "push@herald-console.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"}

    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.set_default_timeout(10_000)
    patches = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("request", lambda request: patches.append(request.post_data or "") if request.method == "PATCH" else None)
    page.on("pageerror", lambda error: problems.append("script error: %s" % error))
    page.on("console", lambda message: problems.append(message.text)
            if message.type == "error" and "Failed to load resource" not in message.text else None)
    page.goto(BASE + "/console/")
    page.fill("input[name=token]", server)
    page.click("[data-action=sign-in]")
    mode = page.locator("select[name='delivery.mode']")
    expect(mode).to_be_visible()
    check(mode.locator("option[value=direct]").count() == 1, "direct is a delivery mode")
    for path in ["delivery.apns", "delivery.fcm", "delivery.webpush"]:
        check(not page.locator("input[name='%s']" % path).is_checked(), "%s is not set at first" % path)
    expect(page.locator("[data-block-body=apns]")).to_be_hidden()

    def shown_text():
        # What the page shows: its text and every control's value.
        return page.evaluate("""() => document.body.innerText + '\\n' +
            [...document.querySelectorAll('input, textarea, select')].map((c) => c.value).join('\\n')""")

    # Direct mode with an APNs block, first without its key: refused at the key's field, nothing saved.
    mode.select_option("direct")
    page.check("input[name='delivery.apns']")
    expect(page.locator("[data-block-body=apns]")).to_be_visible()
    check(page.locator("input[name='delivery.apns.privateKeySet']").is_disabled(), "privateKeySet is read-only in the form")
    page.fill("input[name='delivery.apns.teamId']", "TEAM123456")
    page.fill("input[name='delivery.apns.keyId']", "KEY1234567")
    page.fill("input[name='delivery.apns.topic']", "com.example.chat")
    page.click("[data-action=save-settings]")
    expect(page.locator("[data-error-for='delivery.apns.privateKey']")).to_contain_text("ERR_INVALID_PREFERENCE")
    check(call("GET", "/v1/settings/notifications", server)[1]["delivery"]["mode"] == "pull", "a refused save changed nothing")
    page.fill("textarea[name='delivery.apns.privateKey']", apns_pem)
    page.click("[data-action=save-settings]")
    expect(page.locator("#settings-status")).to_contain_text("whsec_")
    delivery = call("GET", "/v1/settings/notifications", server)[1]["delivery"]
    check(delivery["mode"] == "direct" and delivery["apns"] == {
        "teamId": "TEAM123456", "keyId": "KEY1234567", "topic": "com.example.chat", "endpoint": "https://api.push.apple.com",
        "sandboxEndpoint": "https://api.sandbox.push.apple.com", "privateKeySet": True} and delivery["fcm"] is None,
        "direct delivery through the API: %s" % delivery)
    # Shown as set, never as text: the textarea is empty again, and no line of the key is on the page.
    expect(page.locator("input[name='delivery.apns.privateKeySet']")).to_be_checked()
    expect(page.locator("textarea[name='delivery.apns.privateKey']")).to_have_value("")
    expect(page.locator("input[name='delivery.apns.teamId']")).to_have_value("TEAM123456")
    check(not any(line in shown_text() for line in secret_lines), "the APNs key is shown in the page")

    # A change without the key keeps it (the PATCH carries no privateKey); a refused endpoint shows at its field.
    page.fill("input[name='delivery.apns.endpoint']", "http://api.push.apple.com")
    page.click("[data-action=save-settings]")
    expect(page.locator("[data-error-for='delivery.apns.endpoint']")).to_contain_text("https")
    page.fill("input[name='delivery.apns.endpoint']", "")
    page.fill("input[name='delivery.apns.topic']", "")
    sent = len(patches)
    page.click("[data-action=save-settings]")
    expect(page.locator("#settings-status")).to_contain_text("Saved")
    check(sent < len(patches) and "privateKey" not in patches[-1] and "privateKeySet" not in patches[-1],
          "a save without a new key sends none: %s" % patches[-1:])
    apns = call("GET", "/v1/settings/notifications", server)[1]["delivery"]["apns"]
    check(apns["privateKeySet"] is True and apns["topic"] is None and apns["endpoint"] == "https://api.push.apple.com",
          "the APNs block after a save without its key: %s" % apns)

    # FCM from the service account's JSON text: its email and token URI are shown read-only, its key never.
    page.check("input[name='delivery.fcm']")
    page.fill("input[name='delivery.fcm.projectId']", "herald-console")
    page.fill("textarea[name='delivery.fcm.serviceAccount']", json.dumps(account, indent=2))
    page.click("[data-action=save-settings]")
    expect(page.locator("#settings-status")).to_contain_text("Saved")
    fcm = call("GET", "/v1/settings/notifications", server)[1]["delivery"]["fcm"]
    check(fcm == {"projectId": "herald-console", "clientEmail": account["client_email"], "tokenUri": account["token_uri"],
                  "endpoint": "https://fcm.googleapis.com", "serviceAccountSet": True}, "the FCM block through the API: %s" % fcm)
    email = page.locator("input[name='delivery.fcm.clientEmail']")
    expect(email).to_have_value(account["client_email"])
    check(email.is_disabled() and page.locator("input[name='delivery.fcm.tokenUri']").is_disabled()
          and page.locator("input[name='delivery.fcm.serviceAccountSet']").is_disabled(), "the FCM block's read-only fields")
    expect(page.locator("textarea[name='delivery.fcm.serviceAccount']")).to_have_value("")
    check(not any(line in shown_text() for line in secret_lines), "a key is shown in the page")

    # Web Push: no key pair at first; the button makes it, and the page shows the API's public key.
    check(call("GET", "/v1/settings/delivery/webpush-keys", server)[0] == 404, "no Web Push key pair yet")
    page.check("input[name='delivery.webpush']")
    page.fill("input[name='delivery.webpush.subject']", "ops@example.com")
    page.click("[data-action=save-settings]")
    expect(page.locator("[data-error-for='delivery.webpush.subject']")).to_contain_text("mailto")
    page.fill("input[name='delivery.webpush.subject']", "mailto:ops@example.com")
    page.click("[data-action=save-settings]")
    expect(page.locator("#settings-status")).to_contain_text("Saved")
    page.click("[data-action=make-webpush-keys]")
    expect(page.locator("[data-webpush-key]")).to_have_text(re.compile(r"^B[A-Za-z0-9_-]{86}$"))
    expect(page.locator("[data-action=make-webpush-keys]")).to_be_hidden()
    status, keys = call("GET", "/v1/settings/delivery/webpush-keys", server)
    check(status == 200, "the key pair was made: %s" % keys)
    expect(page.locator("[data-webpush-key]")).to_have_text(keys["publicKey"])
    page.reload()
    expect(page.locator("[data-webpush-key]")).to_have_text(keys["publicKey"])
    check(not any(line in shown_text() for line in secret_lines), "a key is shown in the page after a reload")
    page.screenshot(path=os.path.join(SHOTS, "settings-direct.png"), full_page=True)
    check(call("GET", "/v1/settings/notifications", server)[1]["delivery"]["webpush"] == {"subject": "mailto:ops@example.com"},
          "the Web Push block through the API")

    # Removing a block (and its key) asks first; cancelled, nothing changes.
    page.uncheck("input[name='delivery.apns']")
    expect(page.locator("[data-block-body=apns]")).to_be_hidden()
    page.click("[data-action=save-settings]")
    page.click("[data-action=confirm-no]")
    check(call("GET", "/v1/settings/notifications", server)[1]["delivery"]["apns"] is not None, "a cancelled removal changed nothing")
    page.click("[data-action=save-settings]")
    page.click("[data-action=confirm-yes]")
    expect(page.locator("#settings-status")).to_contain_text("Saved")
    delivery = call("GET", "/v1/settings/notifications", server)[1]["delivery"]
    check(delivery["apns"] is None and delivery["fcm"]["serviceAccountSet"] is True and delivery["mode"] == "direct",
          "the APNs block removed: %s" % delivery)
    expect(page.locator("input[name='delivery.apns']")).not_to_be_checked()
    check(not any(line in shown_text() for line in secret_lines) and not any(line in body for body in patches[-2:] for line in secret_lines),
          "a key is shown in the page or sent again")
    page.context.close()


def main():
    os.makedirs(SHOTS, exist_ok=True)
    app, keys, dead_id = setup()
    server = keys["server"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.set_default_timeout(10_000)
        requests, problems = [], []
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: problems.append("script error: %s" % error))
        page.on("console", lambda message: problems.append(message.text)
                if message.type == "error" and "Failed to load resource" not in message.text else None)

        response = page.goto(BASE + "/console/")
        csp = response.headers.get("content-security-policy", "")
        check("script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp, "CSP: %r" % csp)
        html = page.content()
        check("<script>" not in html and "onclick" not in html and "style=" not in html, "inline script or style in the page")

        # Sign in with the server key.
        page.fill("input[name=token]", server)
        page.click("[data-action=sign-in]")
        replies = page.locator("select[name='groupPreferences.replies']")
        expect(replies).to_be_visible()
        page.screenshot(path=os.path.join(SHOTS, "settings.png"), full_page=True)

        # Change a default; the API sees it.
        replies.select_option("SUBSCRIBE_TO_SUBSCRIBED_THREADS")
        page.uncheck("input[name='groupPreferences.replies.userCanOverride']")
        page.click("[data-action=save-settings]")
        expect(page.locator("#settings-status")).to_contain_text("Saved")
        settings = call("GET", "/v1/settings/notifications", server)[1]
        check(settings["groupPreferences"]["replies"] == {"value": "SUBSCRIBE_TO_SUBSCRIBED_THREADS", "userCanOverride": False},
              "the saved default through the API: %s" % settings["groupPreferences"]["replies"])

        # The digest window (SPEC §17): a number field; an out-of-range value is refused at the field, 30 is saved.
        digest = page.locator("input[name='replyDigestSeconds']")
        expect(digest).to_have_value("0")
        digest.fill("2")
        page.click("[data-action=save-settings]")
        expect(page.locator("[data-error-for='replyDigestSeconds']")).to_contain_text("replyDigestSeconds")
        digest.fill("30")
        page.click("[data-action=save-settings]")
        expect(page.locator("#settings-status")).to_contain_text("Saved")
        check(call("GET", "/v1/settings/notifications", server)[1]["replyDigestSeconds"] == {"value": 30, "userCanOverride": True},
              "the digest window through the API")

        # Built-in delivery: the first push mode shows the signing secret once; secretSet is shown, not sent.
        check(page.locator("input[name='delivery.secretSet']").is_disabled(), "delivery.secretSet is read-only in the form")
        page.select_option("select[name='delivery.mode']", "webhook")
        page.fill("input[name='delivery.url']", "http://127.0.0.1:9/hook")
        page.click("[data-action=save-settings]")
        expect(page.locator("#settings-status")).to_contain_text("whsec_")
        delivery = call("GET", "/v1/settings/notifications", server)[1]["delivery"]
        check(delivery["mode"] == "webhook" and delivery["secretSet"] is True and "secret" not in delivery,
              "delivery through the API: %s" % delivery)
        page.select_option("select[name='delivery.mode']", "pull")
        page.click("[data-action=save-settings]")
        expect(page.locator("#settings-status")).to_contain_text("Saved")
        check("whsec_" not in page.locator("#settings-status").inner_text(), "the secret is shown once")
        check(call("GET", "/v1/settings/notifications", server)[1]["delivery"]["mode"] == "pull", "delivery back to pull")

        # A validation error shows at its field, and nothing is saved.
        page.fill("input[name=largeGroupThreshold]", "0")
        page.click("[data-action=save-settings]")
        error = page.locator("[data-error-for=largeGroupThreshold]")
        expect(error).to_contain_text("ERR_INVALID_PREFERENCE")
        check(call("GET", "/v1/settings/notifications", server)[1]["largeGroupThreshold"] == 1000, "a refused save changed nothing")
        page.screenshot(path=os.path.join(SHOTS, "settings-error.png"), full_page=True)

        # Restore defaults, after the confirmation.
        page.click("[data-action=restore-defaults]")
        page.click("[data-action=confirm-yes]")
        expect(page.locator("#settings-status")).to_contain_text("defaults restored")
        check(call("GET", "/v1/settings/notifications", server)[1]["groupPreferences"]["replies"]["value"] == "SUBSCRIBE_TO_ALL",
              "defaults restored through the API")
        expect(replies).to_have_value("SUBSCRIBE_TO_ALL")

        # Users: carol's preferences (one of them hers), her inbox row and an explain result.
        page.click("[data-view=users]")
        page.fill("input[name=uid]", "carol")
        page.click("[data-action=lookup-user]")
        row = page.locator("#user-inbox tbody tr[data-thread=m1]")
        expect(row).to_be_visible()
        cells = row.locator("td")
        check(cells.nth(2).inner_text() == "1" and cells.nth(3).inner_text() == "1" and cells.nth(4).inner_text() == "1",
              "carol's inbox row: %s" % row.inner_text())
        mine = page.locator("#user-preferences tr", has_text="groupPreferences.messages")
        expect(mine.locator(".tag")).to_have_text("user")
        expect(page.locator("#user-preferences tr", has_text="groupPreferences.replies").locator(".tag")).to_have_text("app")
        expect(page.locator("#user-preferences tr", has_text="replyDigestSeconds").locator(".tag")).to_have_text("app")
        # Paged with the API's cursors: 20 threads, then the other 5.
        expect(page.locator("#user-inbox tbody tr")).to_have_count(20)
        page.click("[data-action=inbox-next]")
        expect(page.locator("#user-inbox tbody tr")).to_have_count(5)
        expect(page.locator("#user-inbox tbody tr[data-thread=t0]")).to_be_visible()
        expect(page.locator("[data-action=inbox-next]")).to_be_disabled()
        page.click("[data-action=inbox-first]")
        expect(page.locator("#user-inbox tbody tr[data-thread=m1]")).to_be_visible()
        expect(page.locator("#user-devices li[data-device=phone]")).to_contain_text("apns")
        page.fill("input[name=messageId]", "m2")
        page.click("[data-action=explain]")
        expect(page.locator("#explain-summary")).to_contain_text("Notified: mention")
        check(page.locator("#explain-steps li").count() >= 2, "the decision's steps are listed")

        # The inbox's level column: carol tracks t10 (set in setup), the other threads notify.
        headers = page.locator("#user-inbox thead th").all_inner_texts()
        check("level" in headers, "the inbox has a level column: %s" % headers)
        level_cell = lambda thread: page.locator("#user-inbox tbody tr[data-thread=%s] td" % thread).nth(headers.index("level"))
        expect(level_cell("m1")).to_have_text("notify")
        expect(level_cell("t10")).to_have_text("track")

        # Conversation levels (SPEC §18): none yet; set one, change it, a refused one's error at the form, remove it.
        levels = page.locator("#user-levels tbody tr")
        expect(levels).to_have_count(1)
        expect(levels).to_contain_text("no conversation levels")
        level_form = page.locator("#level-form")
        g1 = page.locator("#user-levels tbody tr[data-conversation=group_g1]")
        page.fill("input[name=conversationId]", "group_g1")
        page.select_option("select[name=level]", "mentions")
        page.click("[data-action=set-level]")
        expect(g1.locator("td").nth(1)).to_have_text("mentions")
        expect(levels).to_have_count(1)
        listed = call("GET", "/v1/users/carol/conversation-levels", server)[1]["data"]
        check([(item["conversationId"], item["level"]) for item in listed] == [("group_g1", "mentions")], "the level through the API: %s" % listed)
        shown = page.evaluate("(ms) => new Date(ms).toLocaleString()", listed[0]["updatedAt"])
        expect(g1.locator("td").nth(2)).to_have_text(shown)
        page.fill("input[name=conversationId]", "group_g1")
        page.select_option("select[name=level]", "nothing")
        page.click("[data-action=set-level]")
        expect(g1.locator("td").nth(1)).to_have_text("nothing")
        expect(levels).to_have_count(1)
        check(call("GET", "/v1/users/carol/conversation-levels", server)[1]["data"][0]["level"] == "nothing", "the changed level through the API")
        page.fill("input[name=conversationId]", "group_g2")
        page.select_option("select[name=level]", "all")
        page.click("[data-action=set-level]")
        expect(level_form.locator("[data-error-for='']")).to_contain_text("ERR_MESSAGE_NO_ACCESS")
        expect(page.locator("#notice")).to_be_hidden()
        expect(levels).to_have_count(1)
        check(len(call("GET", "/v1/users/carol/conversation-levels", server)[1]["data"]) == 1, "a refused level is not set")
        page.screenshot(path=os.path.join(SHOTS, "users-level-error.png"), full_page=True)
        g1.locator("[data-action=remove-level]").click()
        expect(g1).to_have_count(0)
        expect(levels).to_contain_text("no conversation levels")
        expect(level_form.locator(".error")).to_have_text(["", "", ""])
        check(call("GET", "/v1/users/carol/conversation-levels", server)[1]["data"] == [], "the removed level through the API")
        check(call("DELETE", "/v1/users/carol/conversations/group_g1/level", server)[0] == 404, "the level was removed")
        # Paged like the inbox: 21 levels (one-on-one conversations, set through the API) are 20, then the oldest.
        for n in range(21):
            check(call("PUT", "/v1/users/carol/conversations/carol_user_u%02d/level" % n, server, {"level": "all"})[0] == 200, "level %d" % n)
        page.click("[data-action=lookup-user]")
        expect(levels).to_have_count(20)
        expect(page.locator("#user-levels tbody tr[data-conversation=carol_user_u20]")).to_be_visible()
        expect(page.locator("[data-action=levels-first]")).to_be_disabled()
        page.click("[data-action=levels-next]")
        expect(levels).to_have_count(1)
        expect(page.locator("#user-levels tbody tr[data-conversation=carol_user_u00]")).to_be_visible()
        expect(page.locator("[data-action=levels-next]")).to_be_disabled()
        page.click("[data-action=levels-first]")
        expect(levels).to_have_count(20)
        expect(page.locator("#user-levels tbody tr[data-conversation=carol_user_u20]")).to_be_visible()
        page.screenshot(path=os.path.join(SHOTS, "users.png"), full_page=True)

        # Queue: the dead job with its error, requeued; a rejected event; the chart drawn.
        page.click("[data-view=queue]")
        dead = page.locator("#dead-jobs tr[data-job='%s']" % dead_id)
        expect(dead).to_contain_text("BadDeviceToken")
        expect(page.locator("#rejected-events tbody")).to_contain_text("bad-1")
        page.wait_for_timeout(3500)
        painted = page.evaluate("""() => { const c = document.querySelector('#queue-chart');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")
        check(painted > 500, "the queue chart is drawn (%d pixels)" % painted)
        expect(page.locator("[data-stat=dead] dd")).to_have_text("1")
        page.screenshot(path=os.path.join(SHOTS, "queue.png"), full_page=True)
        dead.locator("[data-action=requeue]").click()
        expect(dead).to_have_count(0)
        stats = call("GET", "/v1/jobs/stats", server)[1]
        check(stats["dead"] == 0 and stats["ready"] >= 1, "the requeued job through the API: %s" % stats)

        # The admin token: create an app and a key, revoke the key.
        page.click("[data-action=sign-out]")
        page.fill("input[name=token]", ADMIN)
        page.click("[data-action=sign-in]")
        created = "console-made-" + os.urandom(3).hex()
        page.fill("input[name=newAppId]", created)
        page.click("[data-action=create-app]")
        expect(page.locator("#apps-list tr[data-app='%s']" % created)).to_be_visible()
        expect(page.locator("#keys-app")).to_have_text(created)
        page.select_option("select[name=keyRole]", "worker")
        page.fill("input[name=keyLabel]", "made in the console")
        page.click("[data-action=create-key]")
        secret = page.locator("[data-secret]")
        expect(secret).to_contain_text("hk_")
        token = secret.inner_text()
        check(call("GET", "/v1/whoami", token)[1].get("role") == "worker", "the new key works")
        page.screenshot(path=os.path.join(SHOTS, "apps.png"), full_page=True)
        page.locator("#keys-list [data-action=revoke-key]").click()
        page.click("[data-action=confirm-yes]")
        expect(page.locator("#keys-list tbody tr")).to_have_count(0)
        check(call("GET", "/v1/whoami", token)[0] == 401, "the revoked key is refused")
        status, body = call("POST", "/v1/apps", ADMIN, {"id": created})
        check(status == 409, "the app exists")

        direct_delivery(browser, requests, problems)

        # A narrow window.
        narrow = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
        narrow.on("request", lambda request: requests.append(request.url))
        narrow.goto(BASE + "/console/")
        narrow.fill("input[name=token]", server)
        narrow.click("[data-action=sign-in]")
        expect(narrow.locator("select[name='groupPreferences.replies']")).to_be_visible()
        overflow = narrow.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        check(overflow <= 1, "the narrow page scrolls sideways by %d px" % overflow)
        narrow.screenshot(path=os.path.join(SHOTS, "settings-narrow.png"), full_page=True)
        browser.close()

    foreign = [url for url in requests if not url.startswith(BASE + "/")]
    check(not foreign, "requests to other origins: %s" % foreign)
    check(not problems, "problems in the page: %s" % problems)
    print("console: %d requests, all to %s; screenshots in %s" % (len(requests), BASE, os.path.normpath(SHOTS)), file=sys.stderr)


if __name__ == "__main__":
    main()
