/* Client runtime: the program's globals shared through the region
 * (globals.h, docs/dsm.md "Globals"), between the client (client.c) and
 * the region (region.h) and the executable's description (segment.h).
 *
 * The descriptor CREATE carries: magic, the pages' first and end address
 * in the executable (the same in every rank, or the ranks run different
 * executables or load them at different addresses) and the address of
 * the region's pages that hold them; host byte order, as the image's. */
#include "globals.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_error.h"
#include "region.h"
#include "segment.h"


static struct {
	uintptr_t lo, hi;   /* the shared pages, in the executable */
	bool shared;        /* mapped over by the region's */
	/* a worker's own bytes of the excluded ranges (segment.h), kept
	 * from before the region's pages covered them */
	struct lm_segment_range *kept;
	uint8_t *kept_bytes;
	size_t nkept;
} gl;

bool lm_globals_wanted(void)
{
	const char *v = getenv("LEMURIA_GLOBALS");

	return !v || strcmp(v, "copy") != 0;
}

int lm_globals_span(size_t page, size_t *bytes, char *err, size_t errlen)
{
	int rc = lm_segment_pages(page, &gl.lo, &gl.hi, err, errlen);

	if (rc == 0)
		*bytes = gl.hi - gl.lo;
	return rc;
}

int lm_globals_share(void *pages, size_t page,
		     uint8_t desc[LM_GLOBALS_DESC_BYTES], char *err,
		     size_t errlen)
{
	uint8_t *dst = pages;
	const struct lm_globals_desc d = { gl.lo, gl.hi, (uintptr_t)pages };
	int rc;

	if (!gl.hi) {
		snprintf(err, errlen, "lm_globals_span was not called");
		return LM_EINVAL;
	}
	/* the region's pages may hold what a freed allocation left there;
	 * a zero page of ours costs a read of theirs, not a write */
	for (uintptr_t off = 0; off < gl.hi - gl.lo; off += page) {
		const uint8_t *src = (const uint8_t *)(gl.lo + off);

		if (lm_segment_bytes_nonzero(src, page))
			lm_segment_bytes_copy(dst + off, src, page);
		else if (lm_segment_bytes_nonzero(dst + off, page))
			memset(dst + off, 0, page);
	}
	rc = lm_region_alias((void *)gl.lo, pages, gl.hi - gl.lo, err,
			     errlen);
	if (rc == 0) {
		lm_globals_desc_put(desc, &d);
		gl.shared = true;
	}
	return rc;
}

bool lm_globals_is_desc(const uint8_t *data, size_t len)
{
	struct lm_globals_desc d;

	return lm_globals_desc_get(data, len, &d);
}

/* Keeps the worker's own bytes of the excluded ranges. */
static int keep_excluded(char *err, size_t errlen)
{
	const struct lm_segment_range *ex;
	uintptr_t start, end;
	size_t n, bytes = 0;
	int rc = lm_segment_layout(&start, &end, &ex, &n, err, errlen);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		bytes += ex[i].end - ex[i].start;
	gl.kept = malloc((n ? n : 1) * sizeof(*gl.kept));
	gl.kept_bytes = malloc(bytes ? bytes : 1);
	if (!gl.kept || !gl.kept_bytes) {
		snprintf(err, errlen, "no memory for %zu bytes of library "
			 "variables", bytes);
		return LM_ENOMEM;
	}
	bytes = 0;
	for (size_t i = 0; i < n; i++) {
		gl.kept[i] = ex[i];
		lm_segment_bytes_copy(gl.kept_bytes + bytes,
				      (const void *)ex[i].start,
				      ex[i].end - ex[i].start);
		bytes += ex[i].end - ex[i].start;
	}
	gl.nkept = n;
	return 0;
}

int lm_globals_join(const uint8_t *desc, size_t len, size_t page,
		    char *err, size_t errlen)
{
	struct lm_globals_desc d;
	int rc;

	if (!lm_globals_desc_get(desc, len, &d)) {
		snprintf(err, errlen, "not a description of shared globals");
		return LM_EINVAL;
	}
	rc = lm_segment_pages(page, &gl.lo, &gl.hi, err, errlen);
	if (rc)
		return rc;
	if (gl.lo != d.lo || gl.hi != d.hi) {
		snprintf(err, errlen, "the program's data lies at [%#lx, "
			 "%#lx) here and at [%#llx, %#llx) in rank 0 (another "
			 "executable, or address randomisation, which "
			 "lemuria-run turns off): its globals cannot be "
			 "shared (LEMURIA_GLOBALS=copy copies them at CREATE "
			 "only)", (unsigned long)gl.lo, (unsigned long)gl.hi,
			 (unsigned long long)d.lo, (unsigned long long)d.hi);
		return LM_EINVAL;
	}
	rc = keep_excluded(err, errlen);
	if (rc == 0)
		rc = lm_region_alias((void *)gl.lo,
				     (const void *)(uintptr_t)d.pages,
				     gl.hi - gl.lo, err, errlen);
	gl.shared = rc == 0;
	return rc;
}

/* getopt's state: main's, in rank 0; no worker runs getopt again. */
static bool harmless(const char *name)
{
	static const char *const names[] = { "optind", "optarg", "opterr",
					      "optopt" };

	for (size_t i = 0; name && i < sizeof(names) / sizeof(*names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* The piece of [a, end) that starts at a and belongs to one symbol of
 * the executable's dynamic table (its name in *name), or a byte (*name
 * NULL) where none does. */
static uintptr_t symbol_piece(uintptr_t a, uintptr_t end, const char **name)
{
	const ElfW(Sym) *sym = NULL;
	Dl_info info;
	uintptr_t b = a + 1;

	*name = NULL;
	if (dladdr1((void *)a, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
	    info.dli_sname && info.dli_saddr &&
	    a - (uintptr_t)info.dli_saddr < sym->st_size) {
		*name = info.dli_sname;
		b = (uintptr_t)info.dli_saddr + sym->st_size;
	}
	return b < end ? b : end;
}

int lm_globals_check(char *err, size_t errlen)
{
	size_t off = 0;
	int rc = 0;

	for (size_t i = 0; i < gl.nkept && rc == 0; i++) {
		uintptr_t a = gl.kept[i].start;

		while (a < gl.kept[i].end && rc == 0) {
			const char *name;
			uintptr_t b = symbol_piece(a, gl.kept[i].end, &name);
			uint8_t now[64];
			bool same = true;

			for (uintptr_t x = a; x < b && same; x += sizeof(now)) {
				size_t n = b - x < sizeof(now) ? b - x
							       : sizeof(now);

				lm_segment_bytes_copy(now, (const void *)x, n);
				same = memcmp(now, gl.kept_bytes + off +
							   (x - a), n) == 0;
			}
			if (!same && !harmless(name)) {
				snprintf(err, errlen, "the program's globals "
					 "hold %s at %#lx (%zu bytes), set by "
					 "the dynamic linker or a library, and "
					 "it differs between rank 0 and this "
					 "one, so they cannot be shared: build "
					 "with -fPIC (no copies of library "
					 "variables), or set "
					 "LEMURIA_GLOBALS=copy",
					 name ? name : "a variable",
					 (unsigned long)a, (size_t)(b - a));
				rc = LM_EINVAL;
			}
			off += b - a;
			a = b;
		}
	}
	free(gl.kept);
	free(gl.kept_bytes);
	gl.kept = NULL;
	gl.kept_bytes = NULL;
	gl.nkept = 0;
	return rc;
}

void lm_globals_settle(void)
{
	/* a byte of each system page (of each region page, then) */
	for (uintptr_t a = gl.lo; gl.shared && a < gl.hi; a += 4096)
		(void)lm_segment_bytes_nonzero((const void *)a, 1);
	gl.shared = false;
}
