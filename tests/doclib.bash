# Shared by docs.bats, completion.bats and contract.bats: what a tool's
# --help says, what its man page says, and what its bash, zsh and fish
# completions offer.
# Load after helpers.

# shellcheck disable=SC2034  # read by the .bats files that load this one
TOOLS="exec-session exec-accept exec-run exec-report exec-reconcile exec-inspect exec-shares exec-dispatcher exec-loop"
# shellcheck disable=SC2034
MANDIR=$SRC/doc/man
COMPLETION=$BUILD/completions/execkit.bash
ZSH_COMPLETION=$BUILD/completions/_execkit
FISH_COMPLETION=$BUILD/completions/execkit.fish
BASH_COMPLETION_MAIN=/usr/share/bash-completion/bash_completion

# Blanks collapsed to one space, none at either end.
squeeze() {
	sed -e 's/[[:space:]][[:space:]]*/ /g' -e 's/^ //' -e 's/ $//'
}

# The roff escapes a SYNOPSIS or an option heading uses, removed.
unroff() {
	sed -e 's/\\f[BIRP]//g' -e 's/\\f([A-Z][A-Z]//g' -e 's/\\f\[[^]]*\]//g' \
		-e 's/\\-/-/g' -e 's/\\&//g' -e 's/\\(dq/"/g' -e 's/\\(mu/x/g' -e 's/\\e/\\/g'
}

# usage_lines TOOL: the "Usage:" line of TOOL --help and the lines after it
# that start with blanks and the tool's name, without "Usage:", squeezed.
usage_lines() {
	"$1" --help | awk -v t="$1" '
		/^Usage: / { on = 1; sub(/^Usage: /, ""); print; next }
		on && $0 ~ "^[ \t]+" t "([ \t]|$)" { print; next }
		{ on = 0 }' | squeeze
}

# man_section PAGE NAME: the roff source of section NAME of PAGE.
man_section() {
	awk -v want="$2" '
		/^\.SH / { s = $0; sub(/^\.SH +/, "", s); gsub(/"/, "", s); on = (s == want); next }
		on' "$1"
}

# man_synopsis PAGE: each text line of the SYNOPSIS (requests dropped),
# roff escapes removed, squeezed.
man_synopsis() {
	man_section "$1" SYNOPSIS | grep -v "^[.']" | unroff | squeeze | grep -v '^$'
}

# help_long_options TOOL: every --long-option named in TOOL --help.
help_long_options() {
	"$1" --help | grep -oE -- '--[a-z0-9][a-z0-9-]*' | LC_ALL=C sort -u
}

# man_long_options PAGE: the long options the OPTIONS section describes
# (the heading line after each .TP).
man_long_options() {
	man_section "$1" OPTIONS | awk '/^\.TP/ { getline; print }' | unroff |
		grep -oE -- '--[a-z0-9][a-z0-9-]*' | LC_ALL=C sort -u
}

# help_exit_codes TOOL: the exit codes the "Exit status" text of --help names.
help_exit_codes() {
	"$1" --help | sed -n '/Exit status/,$p' | grep -oE '(^|[^0-9+-])(0|6[4-9]|7[0-8])\b' |
		grep -oE '[0-9]+' | LC_ALL=C sort -un
}

# man_exit_codes PAGE: the codes the EXIT STATUS section lists (".B N").
man_exit_codes() {
	man_section "$1" "EXIT STATUS" | sed -n 's/^\.B \([0-9][0-9]*\)$/\1/p' | LC_ALL=C sort -un
}

# complete_words WORD...: what bash completion offers for the last WORD of
# the command line WORD..., one per line, in a real bash with
# bash-completion loaded and the generated completion sourced.
complete_words() {
	bash --norc --noprofile -c '
		. "$1" || exit 90
		. "$2" || exit 91
		shift 2
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"
		COMP_POINT=${#COMP_LINE}
		COMP_TYPE=9
		COMP_KEY=9
		spec=$(complete -p "${1##*/}") || exit 92
		fn=$(printf "%s\n" "$spec" | sed -n "s/.* -F \([^ ]*\) .*/\1/p")
		[ -n "$fn" ] || exit 93
		"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		[ "${#COMPREPLY[@]}" -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}"
	' complete_words "$BASH_COMPLETION_MAIN" "$COMPLETION" "$@"
}

# zsh_complete WORD...: what zsh's completion system offers for the last
# WORD of the command line WORD..., one per line: a real zsh in a
# pseudo-terminal, compinit loading the generated _execkit from its $fpath
# (tests/zsh-complete.zsh).
zsh_complete() {
	timeout 30 zsh -f "$SRC/tests/zsh-complete.zsh" "$(dirname "$ZSH_COMPLETION")" "$*"
}

# fish_complete WORD...: what fish offers for the last WORD of the command
# line WORD..., one per line, without the descriptions and without an
# --option= before a value, as bash offers them (fish_complete_described
# keeps both): `complete -C` with the generated completion loaded.
fish_complete_described() {
	timeout 30 fish --no-config -c 'source $argv[1]; and complete -C $argv[2]' "$FISH_COMPLETION" "$*"
}
fish_complete() {
	fish_complete_described "$@" | cut -f1 | sed 's/^--[a-z0-9-]*=//'
}

# Fail early, and clearly, when what the completion tests need is missing.
need_completion() {
	[ -r "$BASH_COMPLETION_MAIN" ] || fail "bash-completion is not installed ($BASH_COMPLETION_MAIN; scripts/deps.sh installs it)"
	[ -r "$COMPLETION" ] || fail "$COMPLETION is missing: run make in $BUILD"
}
need_zsh_fish() {
	command -v zsh >/dev/null || fail "zsh is not installed (scripts/deps.sh installs it)"
	command -v fish >/dev/null || fail "fish is not installed (scripts/deps.sh installs it)"
	[ -r "$ZSH_COMPLETION" ] || fail "$ZSH_COMPLETION is missing: run make in $BUILD"
	[ -r "$FISH_COMPLETION" ] || fail "$FISH_COMPLETION is missing: run make in $BUILD"
}
