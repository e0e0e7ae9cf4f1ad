#!/bin/sh
# Generate the bash completion of every execkit tool from the tools' own
# sources, so that it cannot drift from them:
#
#   long options      each cmd/exec-*.c `static const struct option options[]`
#                     table (CLI_COMMON_OPTIONS = --help and --version,
#                     CLI_STATE_OPTIONS = --state-dir and --json), and
#                     the `case` patterns of cmd/exec-loop's argument loop
#   short options     the optstring of getopt_long() (exec-loop: its patterns)
#   subcommands       the command table of a multi-command tool, commands[],
#                     and NAME_commands[] for the subcommands of NAME
#                     (exec-loop: the "Usage:" lines of its usage()
#                     here-document)
#   operands          the "Usage:" lines of the USAGE text: the metavariables
#                     after the subcommands (RUN_ID, KIND, SET [PREFIX], ...)
#   option values     the metavariable after each option in the help text
#                     (DIR, FILE, SID, RUN_ID, KIND, ...)
#   list kinds        libcommon/inspect.c inspect_list_kinds[]
#   outcomes          libcommon/protocol.h PROTO_OUTCOMES (--outcome)
#   columns (-o)      exec-inspect list KIND: the fields of record list_KIND
#                     in doc/json.md (tests/json-doc.bats holds them to the
#                     real output); exec-session show: show_columns[] of
#                     cmd/exec-session.c
#
#   sh build-aux/gen-completion.sh SRCDIR > completions/execkit.bash
set -eu
src=${1:-.}

# The help text of a C tool: the USAGE string, one C string literal a line.
c_help() {
	awk '
	/^static const char USAGE\[\] =/ { on = 1; next }
	on {
		last = ($0 ~ /;[ \t]*$/)
		s = $0
		sub(/^[ \t]*"/, "", s); sub(/"[ \t]*;?[ \t]*$/, "", s); sub(/\\n$/, "", s)
		gsub(/\\"/, "\"", s); gsub(/\\\\/, "\\", s)
		print s
		if (last) exit
	}' "$1"
}

# Bash assignments for a C tool's command tables (cli.h): the first string
# of each entry of commands[] = { ... }, and of NAME_commands[] for the
# subcommands of NAME.
c_commands() {
	awk -v tool="$1" '
	match($0, /(^|[ \t])([a-z][a-z0-9_]*_)?commands\[\] = \{/) {
		path = tool
		if (match($0, /[a-z][a-z0-9_]*_commands\[/)) {
			word = substr($0, RSTART, RLENGTH - 10); gsub(/_/, "-", word)
			path = tool " " word
		}
		on = 1; names = ""; next
	}
	on && /^};/ { printf "_execkit_cmds[\"%s\"]=\"%s\"\n", path, names; on = 0; next }
	on && match($0, /^[ \t]*\{ *"[^"]+"/) {
		split(substr($0, RSTART, RLENGTH), f, "\"")
		names = names (names == "" ? "" : " ") f[2]
	}' "$2"
}

# "NAME ARG" per entry of the option table: ARG is 1 when it takes a value.
c_longopts() {
	awk '
	/static const struct option options\[\] = \{/ { on = 1; next }
	on && /^};/ { exit }
	on && /CLI_COMMON_OPTIONS/ { print "help 0"; print "version 0" }
	on && /CLI_STATE_OPTIONS/ { print "state-dir 1"; print "json 0" }
	on && match($0, /\{ *"[^"]+", *[a-z_]+_argument/) {
		e = substr($0, RSTART, RLENGTH)
		split(e, f, "\"")
		print f[2], (e ~ /no_argument/ ? 0 : 1)
	}' "$1"
}

# "-X ARG" per letter of getopt_long's optstring.
c_shortopts() {
	sed -n 's/.*getopt_long([^"]*"\([^"]*\)".*/\1/p' "$1" | head -n 1 |
		awk '{ n = length($0); for (i = 1; i <= n; i++) { c = substr($0, i, 1); if (c == ":") continue
			print "-" c, (substr($0, i + 1, 1) == ":" ? 1 : 0) } }'
}

# exec-loop: the here-document of usage().
sh_help() {
	awk '/cat <<USAGE/ { on = 1; next } on && /^USAGE$/ { exit } on { gsub(/\\\$/, "$"); print }' "$1"
}

# exec-loop: the patterns of the argument loop; --x=*) means --x takes a value.
sh_opts() {
	awk '
	/^while \[ \$# -gt 0 \]; do/ { on = 1; next }
	on && /^done/ { exit }
	on && match($0, /^[ \t]*-[^)]*\)/) {
		p = substr($0, RSTART, RLENGTH - 1)
		gsub(/[ \t]/, "", p)
		n = split(p, alt, "|")
		for (i = 1; i <= n; i++) print alt[i]
	}' "$1" | awk '
	/=\*$/ { sub(/=\*$/, ""); arg[$0] = 1; next }
	{ if (!($0 in seen)) { seen[$0] = 1; order[++n] = $0 } }
	END { for (i = 1; i <= n; i++) print order[i], (order[i] in arg ? 1 : 0) }'
}

# From a tool's help text on stdin, bash assignments for
#   _execkit_cmds["TOOL[ SUB]"]   the subcommands at that point, when the
#                                 second argument is 1 (exec-loop, which has
#                                 no table; a C tool's come from c_commands)
#   _execkit_args["TOOL[ SUB]"]   the operands' metavariables (X... repeats)
#   _execkit_meta["TOOL --opt"]   the metavariable of an option's value
parse_help() {
	awk -v tool="$1" -v want_cmds="${2:-0}" '
	function add(map, key, w,   s) {
		s = " " map[key] " "
		if (index(s, " " w " ") == 0) map[key] = map[key] (map[key] == "" ? "" : " ") w
	}
	function usage_line(line,   n, t, i, j, k, np, paths, newp, alts, na, depth, grp, pos, skip) {
		n = split(line, t, /[ \t]+/)
		np = 1; paths[1] = tool; pos = ""; depth = 0; grp = ""
		for (i = 1; i <= n; i++) {
			if (t[i] == "" || t[i] == tool || t[i] == "[OPTION]...") continue
			if (skip) { skip = 0; continue }
			if (depth > 0 || t[i] ~ /^\[/) {        # an optional group
				grp = grp (grp == "" ? "" : " ") t[i]
				depth += gsub(/\[/, "[", t[i]) - gsub(/\]/, "]", t[i])
				if (depth == 0) {
					if (grp ~ /^\[[A-Z][A-Z0-9_]*(\.\.\.)?\]$/) {
						gsub(/[][]/, "", grp); pos = pos (pos == "" ? "" : " ") grp
					}
					grp = ""
				}
				continue
			}
			if (t[i] == "<") { skip = 1; continue }    # a redirection and its file
			if (t[i] ~ /^-/) {                         # an option, maybe with its value
				if (i < n && t[i + 1] ~ /^[A-Z][A-Z0-9_]*$/) skip = 1
				continue
			}
			if (t[i] ~ /^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$/ && pos == "") {
				na = split(t[i], alts, "|"); k = 0
				for (j = 1; j <= np; j++)
					for (m = 1; m <= na; m++) {
						add(cmds, paths[j], alts[m]); newp[++k] = paths[j] " " alts[m]
					}
				np = k
				for (j = 1; j <= np; j++) paths[j] = newp[j]
				continue
			}
			if (t[i] ~ /^[A-Z][A-Z0-9_.]*$/) pos = pos (pos == "" ? "" : " ") t[i]
		}
		for (j = 1; j <= np; j++) if (pos != "") args[paths[j]] = pos
	}
	/^Usage: / { inusage = 1; sub(/^Usage: /, ""); usage_line($0); next }
	inusage && $0 ~ "^[ \t]+" tool "([ \t]|$)" { usage_line($0); next }
	{ inusage = 0 }
	match($0, /^[ \t]+(-[A-Za-z0-9], )?--[a-z0-9-]+[ =][A-Z][A-Z0-9_]*/) {
		s = substr($0, RSTART, RLENGTH)
		short = match(s, /-[A-Za-z0-9], /) ? substr(s, RSTART, 2) : ""
		sub(/^.*--/, "", s)
		split(s, f, /[ =]/)
		meta[tool " --" f[1]] = f[2]
		if (short != "") meta[tool " " short] = f[2]
	}
	END {
		if (want_cmds) for (k in cmds) printf "_execkit_cmds[\"%s\"]=\"%s\"\n", k, cmds[k]
		for (k in args) printf "_execkit_args[\"%s\"]=\"%s\"\n", k, args[k]
		for (k in meta) printf "_execkit_meta[\"%s\"]=%s\n", k, meta[k]
	}'
}

# Bash assignments for one tool's options ("NAME ARG" lines on stdin).
emit_opts() {
	awk -v tool="$1" '
	{ o = ($1 ~ /^-/ ? $1 : "--" $1); all = all (all == "" ? "" : " ") o
	  if ($2 == 1) printf "_execkit_takes[\"%s %s\"]=1\n", tool, o }
	END { printf "_execkit_opts[%s]=\"%s\"\n", tool, all }'
}

tools=
kinds=$(awk '/inspect_list_kinds\[\] = \{/ { on = 1 } on { print } on && /};/ { exit }' \
	"$src/libcommon/inspect.c" | grep -o '"[a-z_]*"' | tr -d '"' | tr '\n' ' ' | sed 's/ $//')
[ -n "$kinds" ] || { echo "gen-completion: no inspect_list_kinds in $src/libcommon/inspect.c" >&2; exit 1; }
outcomes=$(sed -n 's/^#define PROTO_OUTCOMES //p' "$src/libcommon/protocol.h" |
	grep -o '"[a-z_]*"' | tr -d '"' | tr '\n' ' ' | sed 's/ $//')
[ -n "$outcomes" ] || { echo "gen-completion: no PROTO_OUTCOMES in $src/libcommon/protocol.h" >&2; exit 1; }

# Bash assignments _execkit_columns["exec-inspect list KIND"] from the
# field tables of doc/json.md's list_KIND records, and for exec-session show.
columns() {
	awk '
	/^### record: list_/ { k = $3; sub(/^list_/, "", k); cols[k] = ""; cur = k; next }
	/^### / { cur = ""; next }
	cur != "" && /^\| [a-z_]+ \|/ && !/^\| field \|/ { split($0, f, "|"); gsub(/ /, "", f[2])
		cols[cur] = cols[cur] (cols[cur] == "" ? "" : " ") f[2] }
	END { for (k in cols) printf "_execkit_columns[\"exec-inspect list %s\"]=\"%s\"\n", k, cols[k] }' \
		"$src/doc/json.md" | LC_ALL=C sort
	awk '/show_columns\[\] = \{/ { on = 1 } on { print } on && /};/ { exit }' "$src/cmd/exec-session.c" |
		grep -o '"[a-z_]*"' | tr -d '"' | tr '\n' ' ' |
		sed 's/ $//; s/.*/_execkit_columns["exec-session show"]="&"/'
	echo
}

cat <<'EOF'
# bash completion for the execkit tools.
# GENERATED by build-aux/gen-completion.sh from the option and command tables
# and usage text of cmd/*.c and cmd/exec-loop: do not edit; change the tool
# instead.
# shellcheck shell=bash

declare -gA _execkit_opts=() _execkit_takes=() _execkit_meta=() _execkit_cmds=() _execkit_args=()
declare -gA _execkit_columns=()
EOF
printf '_execkit_kinds="%s"\n' "$kinds"
printf '_execkit_outcomes="%s"\n' "$outcomes"
columns

for f in "$src"/cmd/exec-*.c; do
	t=$(basename "$f" .c)
	tools="$tools $t"
	printf '\n# %s\n' "$t"
	{ c_longopts "$f"; c_shortopts "$f"; } | emit_opts "$t"
	{ c_commands "$t" "$f"; c_help "$f" | parse_help "$t"; } | LC_ALL=C sort
done
f=$src/cmd/exec-loop
tools="$tools exec-loop"
printf '\n# exec-loop\n'
sh_opts "$f" | emit_opts exec-loop
sh_help "$f" | parse_help exec-loop 1 | LC_ALL=C sort

cat <<'EOF'

# Run a tool for completion data: read-only commands, bounded in time, quiet.
# The tool beside the one being completed when it was named by a path.
_execkit_query() {
	local bin=$1
	shift
	[[ $_execkit_bindir ]] && [[ -x $_execkit_bindir/$bin ]] && bin=$_execkit_bindir/$bin
	timeout 2 "$bin" ${_execkit_statedir:+--state-dir "$_execkit_statedir"} "$@" 2>/dev/null
}

# The run ids that make sense where a RUN_ID is completed ($path: the tool
# and its subcommand), those starting with the current word: exec-inspect
# ids finds them by a range over the primary keys, at most 1000, so a state
# of 100 000 queued runs costs what the few ids printed cost.
_execkit_run_ids() {
	local set=all
	case $path in
	"exec-run cancel") set=live ;;
	"exec-shares show") set=running ;;
	"exec-run supervise") set=queued ;;
	exec-report) set=retained ;;
	esac
	_execkit_query exec-inspect --timeout-ms 500 ids "$set" "$cur"
}

# The current session's id (what --session must name).
_execkit_session_ids() {
	_execkit_query exec-session show --json |
		sed -n 's/.*"session_id":"\([^"]*\)".*"status":"current".*/\1/p'
}

# The sessions of this state that have ended (what exec-session adopt takes).
_execkit_ended_session_ids() {
	_execkit_query exec-session show --json | grep -v '"status":"current"' |
		sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p'
}

# Destination names the state knows; nothing when exec-shares cannot tell.
_execkit_destinations() {
	_execkit_query exec-shares capacity show --json | grep -o '"dest:[^"]*"' |
		sed 's/^"dest://; s/"$//' | sort -u
}

# -o COLUMNS: the columns of the table at hand ($path, and for a list its
# KIND, $operand), the word's last comma-separated name completed, the
# names before it kept; no space after, so another ",NAME" can follow.
_execkit_columns_value() {
	local key=$path done=
	[[ $path == "exec-inspect list" ]] && key="$path $operand"
	[[ $cur == *,* ]] && done=${cur%,*},
	# Column names never contain blanks.
	# shellcheck disable=SC2207
	COMPREPLY=($(compgen -P "$done" -W "${_execkit_columns[$key]:-}" -- "${cur##*,}"))
	compopt -o nospace 2>/dev/null
}

# Complete the current word as a value of metavariable $1.
_execkit_value() {
	local list
	case $1 in
	DIR) _filedir -d; return ;;
	FILE | *.jsonl) _filedir; return ;;
	RUN_ID | RUN_ID...)
		# already matched to $cur, in id order; ids never contain blanks
		mapfile -t COMPREPLY < <(_execkit_run_ids)
		return
		;;
	SET) list="all queued running live retained" ;;
	SID) list=$(_execkit_session_ids) ;;
	SESSION_ID) list=$(_execkit_ended_session_ids) ;;
	KIND) list=$_execkit_kinds ;;
	OUTCOME) list=$_execkit_outcomes ;;
	COLUMNS) _execkit_columns_value; return ;;
	NAME | DEST | DESTINATION | destination) list=$(_execkit_destinations) ;;
	DIMENSION) list="executor $(_execkit_destinations | sed 's/^/dest:/')" ;;
	*) return ;;   # a number, a URL, ...: nothing to offer
	esac
	# Ids, kinds and names never contain blanks.
	# shellcheck disable=SC2207
	COMPREPLY=($(compgen -W "$list" -- "$cur"))
}

_execkit() {
	local cur prev words cword split
	_init_completion -s || return
	local tool=${words[0]##*/} path i w meta npos=0 nargs operand=
	local _execkit_statedir=${EXEC_STATE_DIR:-} _execkit_bindir=
	[[ ${words[0]} == */* ]] && _execkit_bindir=${words[0]%/*}
	path=$tool
	[[ ${_execkit_opts[$tool]+set} ]] || return

	# Walk the words before the current one: options (and their values),
	# subcommands, operands.  --state-dir on the line wins over the environment.
	for ((i = 1; i < cword; i++)); do
		w=${words[i]}
		case $w in
		--state-dir=*) _execkit_statedir=${w#*=} ;;
		--*=*) ;;
		-*)
			if [[ ${_execkit_takes["$tool $w"]+set} ]]; then
				[[ $w == --state-dir ]] && _execkit_statedir=${words[i + 1]}
				((i++))
			fi
			;;
		*)
			if ((npos == 0)) && [[ " ${_execkit_cmds[$path]} " == *" $w "* ]]; then
				path="$path $w"
			else
				((npos++ == 0)) && operand=$w
			fi
			;;
		esac
	done
	_execkit_statedir=${_execkit_statedir/#\~/$HOME}

	# The value of an option: --opt VALUE or --opt=VALUE.
	if [[ $split == true || ${_execkit_takes["$tool $prev"]+set} ]] && [[ $prev == -* ]]; then
		[[ ${_execkit_takes["$tool $prev"]+set} ]] || return
		meta=${_execkit_meta["$tool $prev"]:-}
		_execkit_value "${meta:-${prev#--}}"
		return
	fi
	if [[ $cur == -* ]]; then
		# shellcheck disable=SC2207
		COMPREPLY=($(compgen -W "${_execkit_opts[$tool]}" -- "$cur"))
		return
	fi
	if ((npos == 0)) && [[ ${_execkit_cmds[$path]:-} ]]; then
		# shellcheck disable=SC2207
		COMPREPLY=($(compgen -W "${_execkit_cmds[$path]}" -- "$cur"))
		return
	fi
	# An operand: the metavariable at its position; X... repeats.
	read -r -a nargs <<<"${_execkit_args[$path]:-}"
	((${#nargs[@]})) || return
	if ((npos < ${#nargs[@]})); then
		meta=${nargs[npos]}
	else
		meta=${nargs[${#nargs[@]} - 1]}
		[[ $meta == *... ]] || return
	fi
	_execkit_value "${meta%...}"
}

EOF
printf 'complete -F _execkit%s\n' "$tools"
