/* Datagram authentication with a per-layout secret.
 *
 * The MAC is GMAC: AES-256-GCM with an empty plaintext and the whole
 * datagram as associated data (computed by gmac.c, libsodium or OpenSSL:
 * the same tag, whichever is fastest here), under a key derived from the
 * layout key for each (sender id, sender session); the nonce is the
 * datagram's stamp, which never repeats within a session.  On a CPU
 * without AES-NI the same scheme runs with ChaCha20-Poly1305 instead; all
 * nodes of a layout must then lack AES-NI alike (docs/protocol.md).  Safe
 * to share between threads. */
#ifndef LM_AUTH_H
#define LM_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct lm_auth lm_auth;

/* Copies the key.  NULL on allocation or libsodium initialisation failure. */
lm_auth *lm_auth_create(const uint8_t key[LM_KEY_BYTES]);
void lm_auth_destroy(lm_auth *auth);

/* Derives the 32-byte key from the contents of a secret file (at least 16
 * bytes; BLAKE2b of the contents).  Returns 0, or LM_EIO / LM_EINVAL with a
 * message naming the file in err. */
int lm_auth_key_from_file(const char *path, uint8_t key[LM_KEY_BYTES],
			  char *err, size_t errlen);

/* dg holds an encoded datagram of `len` bytes (header with LM_DGF_MAC set,
 * then payload) and has room for LM_WIRE_MAC_SIZE more; the MAC is written
 * at dg + len. */
void lm_auth_sign(const lm_auth *auth, uint8_t *dg, size_t len);

/* dg is a whole received datagram of `len` bytes ending in the MAC.
 * Returns 0 when authentic, LM_EAUTH otherwise (including len too short). */
int lm_auth_verify(const lm_auth *auth, const uint8_t *dg, size_t len);

/* Which code computes the GMAC.  All give the same tag, so the ends of a
 * link may differ; for tests and benchmarks. */
enum lm_auth_engine {
	LM_AUTH_AUTO,	 /* gmac.c where the CPU can, else the two below */
	LM_AUTH_SODIUM,	 /* libsodium alone */
	LM_AUTH_OPENSSL, /* OpenSSL, every length */
	LM_AUTH_OWN,	 /* gmac.c (AES-NI, AVX-512BW, VPCLMULQDQ) */
};

/* Returns false, and changes nothing, when this host cannot run it (no
 * AES-NI: ChaCha20-Poly1305 then, which only libsodium runs). */
bool lm_auth_set_engine(lm_auth *auth, enum lm_auth_engine engine);

/* Names the construction in use, for logs and benchmarks. */
const char *lm_auth_construction(const lm_auth *auth);

#endif
