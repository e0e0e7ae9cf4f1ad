# zsh -f zsh-complete.zsh FPATH_DIR LINE: what zsh's own completion system
# (compinit, the _execkit function found in FPATH_DIR) offers for the last
# word of LINE, one match a line.  A zsh in a pseudo-terminal (zpty) gets
# LINE and a TAB; compadd, wrapped, prints each match it adds, and a
# function run after the completion marks the end.  An --option= before a
# value is left off, as bash leaves it off.
zmodload zsh/zpty || exit 90
zpty ek zsh -f -i || exit 91
zpty -w ek "PROMPT= RPROMPT=; fpath=(${(q)1} \$fpath)"
zpty -w ek 'autoload -U compinit && compinit -u -D'
zpty -w ek 'zstyle ":completion:*" insert-tab false'
zpty -w ek 'compadd() {
	if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
	local -a hits; local h
	builtin compadd -A hits "$@"
	for h in $hits; do builtin print -rn -- $'"'"'\0M\0'"'"'"${IPREFIX#--*=}$h"$'"'"'\0\n'"'"'; done
	builtin compadd "$@"
}'
zpty -w ek 'ek_end() { builtin print -rn -- $'"'"'\0END\0\n'"'"'; exit }; comppostfuncs=(ek_end)'
zpty -w ek "$2"$'\t'
local line
integer n=0
while zpty -r ek line; do
	[[ $line == *$'\0'END$'\0'* ]] && break
	[[ $line == *$'\0'M$'\0'* ]] && print -r -- "${${line#*$'\0'M$'\0'}%%$'\0'*}"
	(( ++n < 100000 )) || break
done
zpty -d ek
