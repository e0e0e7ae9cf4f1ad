/*
 * nodl — dlopen() and its kin for the statically linked exec-inspect: they
 * refuse.
 *
 * SQLite's extension loader refers to them.  Left to the static glibc, the
 * link warns that its dlopen() needs the build's shared glibc at run time,
 * and a shared object loaded into a static program would bring a second C
 * library with it.  No execkit connection loads an extension (the loader is
 * off unless enabled, and nothing enables it), so these only ever refuse.
 *
 * The link renames the references (-Wl,--wrap=dlopen and so on: the static
 * glibc's own dlopen() is linked anyway, and its link warning is given for
 * any reference to the name).  An object of that program alone.
 */
#include <stddef.h>

void *__wrap_dlopen(const char *file, int mode);
void *__wrap_dlsym(void *handle, const char *name);
int __wrap_dlclose(void *handle);
char *__wrap_dlerror(void);

void *
__wrap_dlopen(const char *file, int mode)
{
	return NULL;
}

void *
__wrap_dlsym(void *handle, const char *name)
{
	return NULL;
}

int
__wrap_dlclose(void *handle)
{
	return -1;
}

char *
__wrap_dlerror(void)
{
	return (char *)"no dynamic loading in the statically linked exec-inspect";
}
