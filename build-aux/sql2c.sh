#!/bin/sh
# Turn schema/NNN_name.sql files into a C array of {name, sql} steps,
# applied in order; the step count is the schema version.
set -eu
printf '/* generated from the schema directory by build-aux/sql2c.sh; do not edit */\n'
printf 'static const struct schema_step schema_steps[] = {\n'
for f in "$@"; do
	printf '\t{ "%s",\n' "$(basename "$f")"
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t  "/' -e 's/$/\\n"/' "$f"
	printf '\t},\n'
done
printf '};\n'
