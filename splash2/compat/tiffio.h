/* Stand-in for <tiffio.h>, for SPLASH-2 volrend only (tests/splash2-suite.sh).
 *
 * volrend writes its frames with the few libtiff calls below; the
 * distribution ships a 1994 libtiff that does not build on x86-64, and the
 * suite only compares the pthreads frame with the Lemuria one byte for
 * byte.  So this writes each image as a binary PGM (P5: "P5 W H 255", then
 * the rows as given), whatever the tags say; every tag but the width and
 * the height is ignored.  Not a TIFF writer.
 */
#ifndef LM_COMPAT_TIFFIO_H
#define LM_COMPAT_TIFFIO_H
/* No <stdlib.h>: volrend declares calloc itself, K&R style. */
#include <stdarg.h>
#include <stdio.h>

#define TIFFTAG_IMAGEWIDTH	256
#define TIFFTAG_IMAGELENGTH	257
#define TIFFTAG_BITSPERSAMPLE	258
#define TIFFTAG_COMPRESSION	259
#define TIFFTAG_PHOTOMETRIC	262
#define TIFFTAG_ORIENTATION	274
#define TIFFTAG_SAMPLESPERPIXEL	277
#define TIFFTAG_PLANARCONFIG	284
#define TIFFTAG_COLORMAP	320
#define COMPRESSION_LZW		5
#define PHOTOMETRIC_PALETTE	3
#define ORIENTATION_BOTLEFT	4
#define PLANARCONFIG_CONTIG	1

typedef struct {
	FILE *f;
	long width, height, row;
} TIFF;

static TIFF *TIFFOpen(const char *name, const char *mode)
{
	static TIFF one;	/* volrend has one image open at a time */

	(void)mode;
	one.width = one.height = one.row = 0;
	one.f = fopen(name, "wb");
	return one.f != NULL ? &one : NULL;
}

static int TIFFSetField(TIFF *t, int tag, ...)
{
	va_list ap;

	va_start(ap, tag);
	if (tag == TIFFTAG_IMAGEWIDTH)
		t->width = va_arg(ap, int);
	else if (tag == TIFFTAG_IMAGELENGTH)
		t->height = va_arg(ap, int);
	va_end(ap);
	return 1;
}

static int TIFFWriteScanline(TIFF *t, void *row, unsigned long y, int s)
{
	(void)y; (void)s;
	if (t->row++ == 0)
		fprintf(t->f, "P5\n%ld %ld\n255\n", t->width, t->height);
	return fwrite(row, 1, (size_t)t->width, t->f) == (size_t)t->width;
}

static void TIFFClose(TIFF *t)
{
	fclose(t->f);
	t->f = NULL;
}
#endif
