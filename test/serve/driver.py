"""A client of `locksmith serve` in another process, for the browser test: it reads one
command per line on stdin and answers one JSON line per command on stdout.

    session NAME TTL_MS        -> {"id": ...}
    acquire LOCK SESSION WAIT [fair] -> the grant, or {"status": 409, ...}
    release LOCK SESSION TOKEN -> {"released": true}
    keepalive SESSION          -> {...}
"""
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

BASE = sys.argv[1]


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req) as res:
            return json.load(res)
    except urllib.error.HTTPError as err:
        answer = json.load(err)
        answer["status"] = err.code
        return answer


def lock_path(lock_id, action):
    return "/v1/locks/" + urllib.parse.quote(lock_id, safe="") + "/" + action


for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "session":
        out = call("POST", "/v1/sessions", {"ttlMs": int(words[2]), "name": words[1]})
    elif words[0] == "acquire":
        body = {"session": words[2], "waitMs": int(words[3])}
        if len(words) > 4 and words[4] == "fair":
            body["fair"] = True
        out = call("POST", lock_path(words[1], "acquire"), body)
    elif words[0] == "release":
        out = call("POST", lock_path(words[1], "release"), {"session": words[2], "token": words[3]})
    elif words[0] == "keepalive":
        out = call("POST", "/v1/sessions/" + words[1] + "/keepalive")
    else:
        out = {"error": "unknown command"}
    print(json.dumps(out), flush=True)
