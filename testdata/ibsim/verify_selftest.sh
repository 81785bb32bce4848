# Proves verify.py can fail before any ib.* check exists: a made-up report judged against right
# and wrong assertions. Sourced by test.sh (needs W, fail, say).
verify_selftest() {
	local d=$W/selftest
	mkdir -p "$d"
	printf 'ib.sm\nib.far_end\n' >"$d/catalog"
	printf 'sm.guid=0x100001\nfar.desc=Switch1\nfar.port=4\n' >"$d/facts"
	cat >"$d/report.json" <<'JSON'
{"exit_code": 1, "checks": [
 {"id": "ib.sm", "status": "fail", "summary": "SM LID 1 (GUID 0x0000000000100001) does not answer SMInfo",
  "findings": [{"id": "ib.sm/timeout", "status": "fail", "message": "no answer", "slots": {}}]},
 {"id": "ib.far_end", "status": "skip", "summary": "blocked by port.state", "findings": []}]}
JSON
	local v=(python3 "$here/verify.py" "$d/report.json")
	"${v[@]}" 1 2.5 "$d/catalog" "$d/facts" --status ib.sm=fail --finding ib.sm=ib.sm/timeout \
		--mentions ib.sm=@sm.guid --within 10 --status ib.pkey=pass >"$d/ok.out" &&
		fail "verify.py passed a far_end blocked by port.state: $(cat "$d/ok.out")"
	grep -q '^FAIL: ib.far_end is not blocked by a check outside ib\.\*' "$d/ok.out" ||
		fail "verify.py did not name the sysfs blocker: $(cat "$d/ok.out")"
	[ "$(grep -c '^PASS' "$d/ok.out")" = 5 ] && grep -q '^PENDING: --status ib.pkey=pass' "$d/ok.out" ||
		fail "verify.py misjudged right assertions: $(cat "$d/ok.out")"
	sed -i 's/"blocked by port.state"/"blocked by ib.sm"/' "$d/report.json"
	"${v[@]}" 1 2.5 "$d/catalog" "$d/facts" --status ib.sm=fail >/dev/null ||
		fail "verify.py refused a check blocked by ib.sm"
	local wrong
	for wrong in "--status ib.sm=pass" "--finding ib.sm=ib.sm/no-sm" "--mentions ib.sm=@far.desc" \
		"--mentions ib.sm=0x100002" "--within 2" "--status ib.far_end=pass|warn"; do
		# shellcheck disable=SC2086 # each case is a flag and its value
		"${v[@]}" 1 2.5 "$d/catalog" "$d/facts" $wrong >/dev/null && fail "verify.py passed the wrong assertion $wrong"
	done
	"${v[@]}" 0 2.5 "$d/catalog" "$d/facts" >/dev/null && fail "verify.py passed an exit_code that is not the process's"
	# rdmadoctor inventory's answer, beside the report: a wrong SM GUID is refused.
	printf '%s\n' '{"ib_fabric": [{"port": 1, "sm": {"guid": "0000:0000:0010:0002"},' \
		'"neighbour": {"node_desc": "Switch1", "port": 4}}]}' >"$d/report.inventory.json"
	"${v[@]}" 1 2.5 "$d/catalog" "$d/facts" --inventory neighbour.node_desc=Switch1 >/dev/null ||
		fail "verify.py refused the inventory's right neighbour"
	"${v[@]}" 1 2.5 "$d/catalog" "$d/facts" --inventory @facts >"$d/inv.out" &&
		fail "verify.py passed an inventory whose SM GUID is not the reference's: $(cat "$d/inv.out")"
	grep -q "^FAIL: inventory sm.guid '0000:0000:0010:0002'" "$d/inv.out" && grep -q '^PASS: inventory neighbour.port 4' "$d/inv.out" ||
		fail "verify.py misjudged the inventory: $(cat "$d/inv.out")"
	say "verify.py judges a made-up report right (7 wrong assertions refused) and a made-up inventory"
}
