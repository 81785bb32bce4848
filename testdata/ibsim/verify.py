#!/usr/bin/env python3
"""Judges one rdmadoctor JSON report of the ibsim suite against a scenario's assertions.

verify.py REPORT RC ELAPSED CATALOG FACTS [--status ID=S[|S]] [--finding ID=FID]
          [--mentions ID=@KEY|TEXT] [--within SECONDS] [--inventory @facts|PATH=VALUE]...

REPORT is rdmadoctor's stdout, RC its exit status, ELAPSED the seconds it ran, CATALOG a file of
the check IDs `rdmadoctor list` names (one a line), FACTS the live reference facts (key=value).
--inventory judges `rdmadoctor inventory --format json` of the same fabric, read from REPORT's
name with .inventory.json for .json. Prints one line per assertion: PASS, PENDING (the check is not in the catalog yet) or FAIL;
exits 1 when any failed.
"""
import json
import re
import sys

CHECKS = ("ib.sm", "ib.path", "ib.far_end", "ib.pkey")


def load_facts(path):
    facts = {}
    with open(path) as f:
        for line in f:
            key, sep, value = line.rstrip("\n").partition("=")
            if sep:
                facts[key] = value
    return facts


def check_text(check):
    """Everything the report says about a check, lower-cased, for --mentions."""
    parts = [check.get(k) or "" for k in ("summary", "observed", "expected")]
    parts += check.get("details") or []
    for f in check.get("findings") or []:
        parts += [f.get("message") or "", f.get("fix") or "", json.dumps(f.get("slots") or {})]
    parts.append(json.dumps(check.get("evidence") or {}))
    return "\n".join(str(p) for p in parts).lower()


def names(text, value):
    """Whether text names value; a GUID (0x...) matches with or without leading zeros, the 0x
    prefix or sysfs' colons."""
    value = value.lower()
    if re.fullmatch(r"0x[0-9a-f]+", value):
        digits = value[2:].lstrip("0") or "0"
        flat = re.sub(r"(?<=[0-9a-f]):(?=[0-9a-f])", "", text)
        return re.search(r"(?<![0-9a-fx])(0x)?0*" + re.escape(digits) + r"(?![0-9a-f])", flat) is not None
    return value in text


# The reference facts (lib.sh) and where `rdmadoctor inventory` shows each in a port's ib_fabric
# entry. smpquery prints a speed in Gb/s and node types capitalised; inventory names them.
INVENTORY_FACTS = {
    "port.lid": "lid", "port.smlid": "sm_lid", "port.state": "state",
    "sm.lid": "sm.lid", "sm.guid": "sm.guid", "sm.priority": "sm.priority", "sm.state": "sm.state",
    "far.type": "neighbour.node_type", "far.guid": "neighbour.node_guid", "far.port": "neighbour.port",
    "far.desc": "neighbour.node_desc", "far.width": "neighbour.width", "far.speed": "neighbour.speed",
    "far.state": "neighbour.state",
}
SPEEDS = {"2.5 Gbps": "SDR", "5.0 Gbps": "DDR", "10.0 Gbps": "QDR"}


def at(entry, path):
    for key in path.split("."):
        entry = entry.get(key) if isinstance(entry, dict) else None
    return entry


def same(fact, got):
    """Whether an inventory value is the reference's: GUIDs by value, names case-blind."""
    if got is None:
        return False
    fact, got = str(fact), str(got)
    if re.fullmatch(r"0x[0-9a-f]+", fact.lower()) and re.fullmatch(r"[0-9a-f:]+", got.lower()):
        return int(fact, 16) == int(got.replace(":", ""), 16)
    return SPEEDS.get(fact, fact).lower() == got.lower()


def judge_inventory(inv, facts, spec, judge):
    """--inventory @facts: the port's ib_fabric entry agrees with every reference fact it shows
    (the SM, the SMs the SA lists, the neighbour, the P_Key table with each key's membership);
    --inventory PATH=VALUE: the entry's PATH (dotted) is VALUE."""
    ports = inv.get("ib_fabric") or []
    lid = int(facts.get("port.lid") or 0)
    port = next((p for p in ports if lid and p.get("lid") == lid), None) or next((p for p in ports if p.get("port") == 1), None)
    if port is None:
        judge(False, f"inventory has no ib_fabric entry for the host's port (LID {lid}): {inv.get('ib_fabric_unavailable')}")
        return
    if spec != "@facts":
        path, _, want = spec.partition("=")
        judge(str(at(port, path)) == want, f"inventory {path} {at(port, path)!r} == {want!r}")
        return
    for key, path in INVENTORY_FACTS.items():
        if facts.get(key, "") != "":
            judge(same(facts[key], at(port, path)), f"inventory {path} {at(port, path)!r} is the reference's {key}={facts[key]}")
    keys = " ".join(k["pkey"] for k in (port.get("pkeys") or {}).get("keys") or [])
    full = all(k["full_member"] == (int(k["pkey"], 16) & 0x8000 != 0) for k in (port.get("pkeys") or {}).get("keys") or [])
    judge(keys == facts.get("pkeys") and full, f"inventory P_Keys {keys!r} (membership bits agree: {full}) are the reference's {facts.get('pkeys')!r}")
    sms = (port.get("sms") or {}).get("sms") or []
    if facts.get("sm.ports", "none") != "none":
        judge(len(sms) == int(facts["sm.ports"]), f"inventory lists {len(sms)} SM(s), the SA {facts['sm.ports']}")
        # The SA's record of another SM's state is opensm's last poll of it (a standby may read
        # DISCOVERING there while `sminfo LID` says STANDBY): the master is compared, the rest
        # by LID and GUID.
        for sm in sms:
            key = f"sm.lid{sm.get('lid')}"
            judge((facts.get(key) == "MASTER") == (sm.get("state") == "MASTER") and same(facts.get(key + ".guid", ""), sm.get("guid")),
                  f"inventory's SA SM at LID {sm.get('lid')} {sm.get('state')} {sm.get('guid')} is the reference's {facts.get(key)} {facts.get(key + '.guid')}")


def main(argv):
    report_path, rc, elapsed, catalog_path, facts_path = argv[1:6]
    with open(catalog_path) as f:
        catalog = {line.strip() for line in f if line.strip()}
    facts = load_facts(facts_path)
    failed = []
    results = []

    def judge(ok, what):
        results.append(("PASS" if ok else "FAIL") + ": " + what)
        if not ok:
            failed.append(what)

    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        report = None
        if catalog & set(CHECKS):
            judge(False, f"the report is not JSON: {e}")
    checks = {c["id"]: c for c in (report or {}).get("checks", [])}
    if report is not None:
        judge(report.get("exit_code") == int(rc), f"report exit_code {report.get('exit_code')} == process status {rc}")
        for cid in CHECKS:
            c = checks.get(cid)
            if c is None or c.get("status") != "skip":
                continue
            blocked = re.search(r"blocked by ([a-z0-9_.]+)", check_text(c))
            judge(not blocked or blocked.group(1).startswith("ib."),
                  f"{cid} is not blocked by a check outside ib.* ({c.get('summary')})")

    args = argv[6:]
    for i in range(0, len(args), 2):
        flag, spec = args[i], args[i + 1]
        if flag == "--inventory":
            try:
                with open(re.sub(r"\.json$", ".inventory.json", report_path)) as f:
                    judge_inventory(json.load(f), facts, spec, judge)
            except (OSError, ValueError) as e:
                judge(False, f"rdmadoctor inventory's JSON: {e}")
            continue
        if flag == "--within":
            if elapsed == "-":
                results.append(f"PENDING: --within {spec} (no ib.* check in rdmadoctor list: not run)")
                continue
            judge(float(elapsed) <= float(spec), f"rdmadoctor returned in {elapsed} s <= {spec} s")
            continue
        cid, _, want = spec.partition("=")
        if cid not in catalog:
            results.append(f"PENDING: {flag} {spec} ({cid} is not in rdmadoctor list)")
            continue
        c = checks.get(cid)
        if c is None:
            judge(False, f"{cid} is in the catalog but not in the report")
            continue
        if flag == "--status":
            judge(c.get("status") in want.split("|"), f"{cid} status {c.get('status')} in {want} ({c.get('summary')})")
        elif flag == "--finding":
            found = [f.get("id") for f in c.get("findings") or [] if f.get("status") != "pass"]
            judge(want in found, f"{cid} has finding {want} (non-pass findings: {', '.join(found) or 'none'})")
        elif flag == "--mentions":
            value = facts.get(want[1:], "") if want.startswith("@") else want
            if not value:
                judge(False, f"{cid} mentions {want}: the reference facts have no {want[1:]}")
            else:
                judge(names(check_text(c), value), f"{cid} names {value} ({want})")
        else:
            judge(False, f"unknown assertion {flag}")
    for line in results:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
