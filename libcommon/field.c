/* field — see field.h. */
#include <string.h>

#include "field.h"
#include "text.h"

const char *
field_id(json_t *o, const char *key, size_t max)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && text_is_id(s, 1, max) ? s : NULL;
}

const char *
field_shaped(json_t *o, const char *key, const char *prefix, size_t hex)
{
	const char *s = json_string_value(json_object_get(o, key));
	size_t pl = strlen(prefix);

	if (!s || strncmp(s, prefix, pl) != 0 || !text_is_hex(s + pl, hex))
		return NULL;
	return s;
}
