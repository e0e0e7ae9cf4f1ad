#!/bin/sh
# Generate the bash, zsh and fish completions of every execkit tool from
# what the tools say of themselves, so that they cannot drift from them:
#
#   the C tools   BINDIR/TOOL --completion-helper (libcommon/opts.c), made
#                 from the tool's own option and command tables: lines
#                 "WHAT<TAB>KEY<TAB>VALUE", with WHAT
#                   opts TOOL        its options, the long ones, then the short
#                   takes TOOL OPT   1: OPT takes a value
#                   meta TOOL OPT    the metavariable of that value
#                   desc TOOL OPT    the first line of OPT's help (zsh, fish)
#                   short TOOL --X   the short spelling of --X
#                   cmds PATH        the commands after PATH (TOOL[ COMMAND])
#                   args PATH        the operands' metavariables (X... repeats)
#                   desc PATH        the first line of a command's help
#                   words KEY        the words an option's value or a command's
#                                    first operand takes: exec-inspect's
#                                    --outcome (OUTCOME) and list (KIND)
#                   columns PATH     -o's columns (exec-session show)
#                   bounds TOOL OPT  a number's bounds (for tests/cli.bats only)
#   exec-loop     (bash) the `case` patterns of its argument loop and the
#                 option lines of its usage() text
#   list columns  exec-inspect list KIND -o: the fields of record list_KIND
#                 in doc/json.md (tests/json-doc.bats holds them to the
#                 real output)
#
#   sh build-aux/gen-completion.sh SRCDIR BINDIR > completions/execkit.bash
#   sh build-aux/gen-completion.sh --zsh SRCDIR BINDIR > completions/_execkit
#   sh build-aux/gen-completion.sh --fish SRCDIR BINDIR > completions/execkit.fish
set -eu
mode=bash
case ${1:-} in
--bash | --zsh | --fish) mode=${1#--}; shift ;;
-*) echo "gen-completion: unknown option '$1'" >&2; exit 64 ;;
esac
src=${1:-.}
bin=${2:-.}
c_tools="exec-accept exec-dispatcher exec-inspect exec-reconcile exec-report exec-run exec-session exec-shares"
tools=" $c_tools exec-loop"

# exec-loop: the here-document of usage().
sh_help() {
	awk '/cat <<USAGE/ { on = 1; next } on && /^USAGE$/ { exit } on { gsub(/\\\$/, "$"); print }' "$1"
}

# exec-loop: "opts" and "takes" from the patterns of its argument loop;
# --x=*) means --x takes a value.
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
	END {
		for (i = 1; i <= n; i++) {
			all = all (i > 1 ? " " : "") order[i]
			if (order[i] in arg) printf "takes\texec-loop %s\t1\n", order[i]
		}
		printf "opts\texec-loop\t%s\n", all
	}'
}

# exec-loop: "meta", "desc" and "short" from its help text: the option
# lines "  -X, --long META  description" (the description from the
# column after two blanks).
sh_help_data() {
	sh_help "$1" | awk '
	function describe(key, text) {
		if (gsub(/\(/, "(", text) > gsub(/\)/, ")", text)) sub(/ *\([^()]*$/, "", text)
		sub(/[,;:]$/, "", text)
		if (!(key in desc)) { desc[key] = 1; printf "desc\t%s\t%s\n", key, text }
	}
	match($0, /^  (-[A-Za-z0-9], )?--[a-z0-9-]+( [A-Z][A-Z0-9_]*)? +[^ ]/) {
		s = substr($0, RSTART, RLENGTH - 1); rest = substr($0, RLENGTH)
		sub(/^ +/, "", s); sub(/ +$/, "", s)
		long = s; sub(/^-[A-Za-z0-9], /, "", long); sub(/ .*/, "", long)
		if (s ~ / [A-Z]/) { m = s; sub(/.* /, "", m); printf "meta\texec-loop %s\t%s\n", long, m }
		describe("exec-loop " long, rest)
		if (s ~ /^-[A-Za-z0-9], /) {
			printf "short\texec-loop %s\t%s\n", long, substr(s, 1, 2)
			describe("exec-loop " substr(s, 1, 2), rest)
		}
	}'
}

# "columns" for exec-inspect list KIND, from doc/json.md's list_KIND records.
list_columns() {
	awk '
	/^### record: list_/ { k = $3; sub(/^list_/, "", k); cols[k] = ""; cur = k; next }
	/^### / { cur = ""; next }
	cur != "" && /^\| [a-z_]+ \|/ && !/^\| field \|/ { split($0, f, "|"); gsub(/ /, "", f[2])
		cols[cur] = cols[cur] (cols[cur] == "" ? "" : " ") f[2] }
	END { for (k in cols) printf "columns\texec-inspect list %s\t%s\n", k, cols[k] }' \
		"$src/doc/json.md" | LC_ALL=C sort
}

# All the data, as "WHAT<TAB>KEY<TAB>VALUE" lines: the scripts below are
# made from these.  The words of exec-inspect's --outcome and list are
# what the scripts offer for OUTCOME and KIND (outcomes, kinds).
data_table() {
	printf 'kinds\t\t%s\noutcomes\t\t%s\n' "$kinds" "$outcomes"
	list_columns
	for t in $c_tools; do
		grep -v '^\(words\|bounds\)	' "$tmp/$t"
	done
	f=$src/cmd/exec-loop
	sh_opts "$f"
	sh_help_data "$f"
}

# The tools' data, asked here, in this shell, so that a tool that fails
# stops the script (in a pipeline it would not).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in $c_tools; do
	"$bin/$t" --completion-helper >"$tmp/$t" ||
		{ echo "gen-completion: $bin/$t --completion-helper failed" >&2; exit 1; }
done
outcomes=$(sed -n 's/^words	exec-inspect --outcome	//p' "$tmp/exec-inspect")
kinds=$(sed -n 's/^words	exec-inspect list	//p' "$tmp/exec-inspect")
if [ -z "$outcomes" ] || [ -z "$kinds" ]; then
	echo "gen-completion: no outcomes or list kinds from $bin/exec-inspect" >&2
	exit 1
fi

# The data as bash assignments, _execkit_WHAT["KEY"]="VALUE" (or
# _execkit_WHAT="VALUE" for an empty KEY); the descriptions are zsh's and
# fish's only.
bash_data() {
	awk -F '\t' '
	function q(s) { gsub(/[\\"$`]/, "\\\\&", s); return "\"" s "\"" }
	$1 == "desc" || $1 == "short" { next }
	$2 == "" { print "_execkit_" $1 "=" q($3); next }
	{ print "_execkit_" $1 "[" q($2) "]=" q($3) }'
}

# The bash completion: the data as bash arrays, and _execkit.
bash_completion() {
	cat <<'EOF'
# bash completion for the execkit tools.
# GENERATED by build-aux/gen-completion.sh from the tools' --completion-helper
# (their option and command tables) and cmd/exec-loop's usage text: do not
# edit; change the tool instead.
# shellcheck shell=bash

declare -gA _execkit_opts=() _execkit_takes=() _execkit_meta=() _execkit_cmds=() _execkit_args=()
declare -gA _execkit_columns=()
EOF
	data_table | bash_data
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
}

# The zsh completion: a #compdef function with the same walk over the words
# as the bash one's and the same queries for values from the state, and the
# descriptions of the options and commands.
zsh_completion() {
	printf '#compdef%s\n' "$tools"
	cat <<'EOF'
# zsh completion for the execkit tools.
# GENERATED by build-aux/gen-completion.sh from the tools' --completion-helper
# (their option and command tables) and cmd/exec-loop's usage text: do not
# edit; change the tool instead.  Installed as _execkit in a directory of
# $fpath (compinit finds it there); sourced after compinit, it registers
# itself with compdef.

typeset -gA _execkit_opts _execkit_takes _execkit_meta _execkit_cmds _execkit_args
typeset -gA _execkit_columns _execkit_desc
EOF
	data_table | awk -F '\t' '
	function q(s) { gsub(/\047/, "\047\\\047\047", s); return "\047" s "\047" }
	$1 == "short" { next }
	$2 == "" { print "typeset -g _execkit_" $1 "=" q($3); next }
	!($1 in body) { order[++n] = $1 }
	{ body[$1] = body[$1] "\t" q($2) " " q($3) "\n" }
	END { for (i = 1; i <= n; i++) printf "_execkit_%s=(\n%s)\n", order[i], body[order[i]] }'
	cat <<'EOF'

# Run a tool for completion data: read-only commands, bounded in time, quiet.
# The tool beside the one being completed when it was named by a path.
_execkit_query() {
	local bin=$1
	shift
	[[ -n $_execkit_bindir && -x $_execkit_bindir/$bin ]] && bin=$_execkit_bindir/$bin
	timeout 2 $bin ${_execkit_statedir:+--state-dir=$_execkit_statedir} "$@" 2>/dev/null
}

# The run ids that make sense where a RUN_ID is completed ($where: the tool
# and its subcommand), those starting with the current word.
_execkit_run_ids() {
	local set=all
	case $where in
	("exec-run cancel") set=live ;;
	("exec-shares show") set=running ;;
	("exec-run supervise") set=queued ;;
	(exec-report) set=retained ;;
	esac
	_execkit_query exec-inspect --timeout-ms 500 ids $set "$PREFIX"
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

# Complete the current word as a value of metavariable $1.
_execkit_value() {
	local -a list
	local key
	case $1 in
	(DIR) _directories; return ;;
	(FILE | *.jsonl) _files; return ;;
	(RUN_ID) list=(${(f)"$(_execkit_run_ids)"}) ;;
	(SET) list=(all queued running live retained) ;;
	(SID) list=(${(f)"$(_execkit_session_ids)"}) ;;
	(SESSION_ID) list=(${(f)"$(_execkit_ended_session_ids)"}) ;;
	(KIND) list=(${=_execkit_kinds}) ;;
	(OUTCOME) list=(${=_execkit_outcomes}) ;;
	(COLUMNS)
		# the columns of the table at hand; the names before the last
		# comma kept, no suffix, so another ",NAME" can follow
		key=$where
		[[ $where == "exec-inspect list" ]] && key="$where $operand"
		compset -P '*,'
		list=(${=_execkit_columns[$key]:-})
		compadd -S '' -a list
		return
		;;
	(NAME | DEST | DESTINATION | destination) list=(${(f)"$(_execkit_destinations)"}) ;;
	(DIMENSION) list=(executor ${(f)"$(_execkit_destinations | sed 's/^/dest:/')"}) ;;
	(*) return 1 ;;   # a number, a URL, ...: nothing to offer
	esac
	compadd -a list
}

_execkit_complete() {
	local tool=${words[1]:t} where w meta operand= opt
	local -i i npos=0
	local -a opts nargs
	local _execkit_statedir=${EXEC_STATE_DIR:-} _execkit_bindir=
	[[ $words[1] == */* ]] && _execkit_bindir=${words[1]:h}
	where=$tool
	(( ${+_execkit_opts[$tool]} )) || return 1

	# Walk the words before the current one: options (and their values),
	# subcommands, operands.  --state-dir on the line wins over the environment.
	for (( i = 2; i < CURRENT; i++ )); do
		w=$words[i]
		case $w in
		(--state-dir=*) _execkit_statedir=${w#*=} ;;
		(--*=*) ;;
		(-*)
			if (( ${+_execkit_takes[$tool $w]} )); then
				[[ $w == --state-dir ]] && _execkit_statedir=$words[i+1]
				(( i++ ))
			fi
			;;
		(*)
			if (( npos == 0 )) && [[ " ${_execkit_cmds[$where]:-} " == *" $w "* ]]; then
				where="$where $w"
			else
				(( npos++ == 0 )) && operand=$w
			fi
			;;
		esac
	done
	_execkit_statedir=${_execkit_statedir/#\~/$HOME}

	# The value of an option: --opt=VALUE or --opt VALUE.
	if [[ $PREFIX == --*=* ]]; then
		opt=${PREFIX%%=*}
		(( ${+_execkit_takes[$tool $opt]} )) || return 1
		compset -P '*='
		meta=${_execkit_meta[$tool $opt]:-}
		_execkit_value ${meta:-${opt#--}}
		return
	fi
	opt=$words[CURRENT-1]
	if (( CURRENT > 2 )) && [[ $opt == -* ]] && (( ${+_execkit_takes[$tool $opt]} )); then
		meta=${_execkit_meta[$tool $opt]:-}
		_execkit_value ${meta:-${opt#--}}
		return
	fi
	if [[ $PREFIX == -* ]]; then
		for w in ${=_execkit_opts[$tool]}; do
			opts+=("$w${_execkit_desc[$tool $w]:+:${_execkit_desc[$tool $w]}}")
		done
		_describe -t options option opts
		return
	fi
	if (( npos == 0 )) && [[ -n ${_execkit_cmds[$where]:-} ]]; then
		for w in ${=_execkit_cmds[$where]}; do
			opts+=("$w${_execkit_desc[$where $w]:+:${_execkit_desc[$where $w]}}")
		done
		_describe -t commands command opts
		return
	fi
	# An operand: the metavariable at its position; X... repeats.
	nargs=(${=_execkit_args[$where]:-})
	(( $#nargs )) || return 1
	if (( npos < $#nargs )); then
		meta=$nargs[npos+1]
	else
		meta=$nargs[-1]
		[[ $meta == *... ]] || return 1
	fi
	_execkit_value ${meta%...}
}

EOF
	printf 'if [[ $funcstack[1] == _execkit ]]; then\n\t_execkit_complete "$@"\nelse\n\tcompdef _execkit_complete%s\nfi\n' "$tools"
}

# The fish completion: a `complete` line for each option (with its
# description, whether it takes a value and which values), for each
# subcommand (offered where __execkit_at finds its parent), and one for the
# operands; the same walk over the words as the bash one's.
fish_completion() {
	cat <<'EOF'
# fish completion for the execkit tools.
# GENERATED by build-aux/gen-completion.sh from the tools' --completion-helper
# (their option and command tables) and cmd/exec-loop's usage text: do not
# edit; change the tool instead.  Installed as execkit.fish in fish's
# vendor_completions.d, with a link under every tool's name (the names fish
# looks for).

EOF
	data_table | awk -F '\t' -v tools="$tools" '
	function q(s) { gsub(/\\/, "\\\\", s); gsub(/\047/, "\\\047", s); return "\047" s "\047" }
	function var(s) { gsub(/[^A-Za-z0-9]/, "_", s); return s }
	$2 == "" { print "set -g __execkit_" $1 " " $3; next }
	$1 == "columns" || $1 == "cmds" || $1 == "args" { print "set -g __execkit_" $1 "_" var($2) " " $3 }
	$1 == "opts" { opts[$2] = $3 }
	$1 == "takes" { takes[$2] = 1; tk[substr($2, 1, index($2, " ") - 1)] = tk[substr($2, 1, index($2, " ") - 1)] " " substr($2, index($2, " ") + 1) }
	$1 == "meta" { meta[$2] = $3 }
	$1 == "desc" { desc[$2] = $3 }
	$1 == "short" { short[$2] = $3; paired[substr($2, 1, index($2, " ")) $3] = 1 }
	$1 == "cmds" { cmds[$2] = $3 }
	# the values of an option that takes metavariable m
	function values(m) {
		if (m == "FILE" || m ~ /\.jsonl$/) return " -r -F"
		if (m == "DIR") return " -x -a " q("(__fish_complete_directories)")
		return " -x -a " q("(__execkit_value " m ")")
	}
	END {
		n = split(tools, tl, " ")
		for (i = 1; i <= n; i++) {
			t = tl[i]
			printf "\n# %s\n", t
			print "set -g __execkit_takes_" var(t) tk[t]
			print "complete -c " t " -f"
			print "complete -c " t " -f -a " q("(__execkit_operand)")
			m = split(opts[t], o, " ")
			for (j = 1; j <= m; j++) {
				k = t " " o[j]
				if (o[j] ~ /^--/) line = "complete -c " t (short[k] != "" ? " -s " substr(short[k], 2) : "") " -l " substr(o[j], 3)
				else if (o[j] ~ /^-[A-Za-z0-9]$/ && !((t " " o[j]) in paired)) line = "complete -c " t " -s " substr(o[j], 2)
				else continue
				if (k in takes) line = line values(meta[k] != "" ? meta[k] : substr(o[j], 3))
				if (desc[k] != "") line = line " -d " q(desc[k])
				print line
			}
			for (p in cmds) {
				if (p != t && index(p, t " ") != 1) continue
				c = split(cmds[p], w, " ")
				for (j = 1; j <= c; j++)
					print "complete -c " t " -f -n " q("__execkit_at \"" p "\"") " -a " w[j] \
					    (desc[p " " w[j]] != "" ? " -d " q(desc[p " " w[j]]) : "")
			}
		}
	}'
	cat <<'EOF'

# The command line before the current word, walked as the bash completion
# walks it: the tool and its subcommands, the number of operands, the
# first operand, the state directory and the tool's directory, one a line.
function __execkit_walk
    set -l tokens (commandline -opc)
    set -l tool (string replace -r '.*/' '' -- $tokens[1])
    set -l tv __execkit_takes_(string replace -ra '[^A-Za-z0-9]' _ -- $tool)
    set -l where $tool
    set -l npos 0
    set -l operand ''
    set -l statedir "$EXEC_STATE_DIR"
    set -l bindir ''
    string match -q -- '*/*' $tokens[1]; and set bindir (string replace -r '/[^/]*$' '' -- $tokens[1])
    set -l n (count $tokens)
    set -l i 2
    while test $i -le $n
        set -l w $tokens[$i]
        switch $w
            case '--state-dir=*'
                set statedir (string replace -- --state-dir= '' $w)
            case '--*=*'
            case '-*'
                if set -q $tv; and contains -- $w $$tv
                    if test $w = --state-dir; and test $i -lt $n
                        set statedir $tokens[(math $i + 1)]
                    end
                    set i (math $i + 1)
                end
            case '*'
                set -l cv __execkit_cmds_(string replace -ra '[^A-Za-z0-9]' _ -- $where)
                if test $npos -eq 0; and set -q $cv; and contains -- $w $$cv
                    set where "$where $w"
                else
                    test $npos -eq 0; and set operand $w
                    set npos (math $npos + 1)
                end
        end
        set i (math $i + 1)
    end
    string match -q -- '~*' $statedir; and set statedir $HOME(string sub -s 2 -- $statedir)
    printf '%s\n' $where $npos "$operand" "$statedir" "$bindir"
end

# Whether the words so far name PATH (a tool and its subcommands) and no
# operand yet: where PATH's subcommands go.
function __execkit_at
    set -l s (__execkit_walk)
    test "$s[1]" = "$argv[1]"; and test "$s[2]" = 0
end

# Run a tool for completion data: read-only commands, bounded in time, quiet.
# The tool beside the one being completed when it was named by a path.
function __execkit_query
    set -l s (__execkit_walk)
    set -l bin $argv[1]
    test -n "$s[5]"; and test -x "$s[5]/$bin"; and set bin "$s[5]/$bin"
    set -l dir
    test -n "$s[4]"; and set dir --state-dir=$s[4]
    timeout 2 $bin $dir $argv[2..-1] 2>/dev/null
end

# The current word, without an --option= before it.
function __execkit_word
    string replace -r -- '^--[^=]*=' '' (commandline -ct)
end

# The values of metavariable $argv[1] for the current word.
function __execkit_value
    set -l s (__execkit_walk)
    switch $argv[1]
        case DIR
            __fish_complete_directories
        case FILE '*.jsonl'
            __fish_complete_path (__execkit_word)
        case RUN_ID
            # the run ids that make sense for the word, matched to it already
            set -l set all
            switch $s[1]
                case 'exec-run cancel'
                    set set live
                case 'exec-shares show'
                    set set running
                case 'exec-run supervise'
                    set set queued
                case exec-report
                    set set retained
            end
            __execkit_query exec-inspect --timeout-ms 500 ids $set (__execkit_word)
        case SET
            printf '%s\n' all queued running live retained
        case SID
            __execkit_query exec-session show --json |
                sed -n 's/.*"session_id":"\([^"]*\)".*"status":"current".*/\1/p'
        case SESSION_ID
            __execkit_query exec-session show --json | grep -v '"status":"current"' |
                sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p'
        case KIND
            printf '%s\n' $__execkit_kinds
        case OUTCOME
            printf '%s\n' $__execkit_outcomes
        case COLUMNS
            # the columns of the table at hand, after the names already given
            set -l key $s[1]
            test "$s[1]" = 'exec-inspect list'; and set key "$s[1] $s[3]"
            set -l cv __execkit_columns_(string replace -ra '[^A-Za-z0-9]' _ -- $key)
            set -q $cv; or return
            set -l done (string match -r -- '^.*,' (__execkit_word))
            printf "$done%s\n" $$cv
        case NAME DEST DESTINATION destination
            __execkit_query exec-shares capacity show --json | grep -o '"dest:[^"]*"' |
                sed 's/^"dest://; s/"$//' | sort -u
        case DIMENSION
            echo executor
            __execkit_query exec-shares capacity show --json | grep -o '"dest:[^"]*"' |
                sed 's/^"//; s/"$//' | sort -u
    end
end

# The operand at the current word: the metavariable at its position in the
# usage of the subcommand named so far; X... repeats.
function __execkit_operand
    set -l s (__execkit_walk)
    set -l cv __execkit_cmds_(string replace -ra '[^A-Za-z0-9]' _ -- $s[1])
    test $s[2] -eq 0; and set -q $cv; and return
    set -l av __execkit_args_(string replace -ra '[^A-Za-z0-9]' _ -- $s[1])
    set -q $av; or return
    set -l args $$av
    set -l meta
    if test $s[2] -lt (count $args)
        set meta $args[(math $s[2] + 1)]
    else
        set meta $args[-1]
        string match -q -- '*...' $meta; or return
    end
    __execkit_value (string replace -- ... '' $meta)
end
EOF
}

case $mode in
bash) bash_completion ;;
zsh) zsh_completion ;;
fish) fish_completion ;;
esac
