/* LEMURIA_PROFILE's lines in rank order (docs/operations.md): each rank
 * writes its line into a directory lemuria-run makes for the run
 * (LM_PROFILE_DIR, liblemuria/client.c), and lemuria-run prints them, in
 * the order of its ranks, once they all ended.  Ranks started another
 * way write to stderr, each when it finalizes. */
#ifndef LM_TOOLS_RANKPROFILE_H
#define LM_TOOLS_RANKPROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* When LEMURIA_PROFILE asks for the lines: makes the directory (mode
 * 0700, under $TMPDIR or /tmp) into dir (len bytes) and sets
 * LM_PROFILE_DIR to it for the ranks.  1 when made, 0 when the profile
 * is off, a negative LM_E* when the directory cannot be made (the ranks
 * then write to stderr; *why says so). */
int lm_rankprofile_begin(char *dir, size_t len, char *why, size_t wlen);

/* Copies the line of each of the n ranks to out in that order
 * ("lemuria-profile rank=R missing=1" for one that wrote none: it died,
 * or never finalized), and removes the directory. */
void lm_rankprofile_end(const char *dir, const uint32_t *ranks, size_t n,
			FILE *out);

#endif
