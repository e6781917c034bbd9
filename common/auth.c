/* Datagram MAC with libsodium, OpenSSL and gmac.c (construction described
 * in auth.h).
 *
 * GMAC (AES-256-GCM with an empty message, the datagram as associated data)
 * runs at about twice the speed of Poly1305 on CPUs with AES-NI, which
 * matters when every 4 KiB page crosses the MAC four times per round trip.
 * GCM's nonce is 12 bytes, too short to hold sender, session and stamp, so
 * each (sender, session) gets its own key derived from the layout key and
 * the nonce is the stamp alone.  Expanded keys are kept in a small
 * direct-mapped cache so that derivation happens once per peer session.
 *
 * All three compute the same tag.  Where the CPU has VPCLMULQDQ, gmac.c
 * hashes 32 blocks per reduction at 27-34 GB/s from 4 KiB and costs
 * about 40 ns a short datagram, so it takes every datagram.  Elsewhere
 * libsodium 1.0.18 hashes at about 3.6 GB/s whatever the length, and
 * OpenSSL's GHASH, eight blocks at a time, reaches 7 GB/s on a 64 KB
 * datagram but spends about 0.4 us per call getting there, so it takes
 * the datagrams of LM_AUTH_BULK bytes and more (docs/performance.md has
 * the figures). */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmac.h"
#include "lm_error.h"
#include "wire.h"

#define LM_AUTH_SECRET_MIN 16
#define LM_AUTH_SECRET_MAX 4096
#define LM_AUTH_CACHE_SLOTS 64 /* power of two */
#define LM_AUTH_NONCE_BYTES 12
#define LM_AUTH_BULK 4096 /* where OpenSSL starts to be the faster */

struct lm_auth_slot {
	uint16_t sender;
	uint64_t session;
	int used;
	uint8_t key[32];
	crypto_aead_aes256gcm_state gcm;
	EVP_CIPHER_CTX *bulk; /* the same key in OpenSSL; NULL until needed */
	int bulk_keyed;
	struct lm_gmac_key own; /* the same key for gmac.c, when it is used */
};

struct lm_auth {
	uint8_t master[LM_KEY_BYTES];
	int use_gcm; /* else ChaCha20-Poly1305 (no AES-NI) */
	int use_own; /* gmac.c for every datagram */
	size_t bulk_min; /* datagrams this long go to OpenSSL */
	pthread_mutex_t lock;
	struct lm_auth_slot slots[LM_AUTH_CACHE_SLOTS];
};

/* Whether gmac.c can compute this auth's tags (AES-NI and VPCLMULQDQ). */
static bool own_possible(const struct lm_auth *auth)
{
	return auth->use_gcm && lm_gmac_available();
}

lm_auth *lm_auth_create(const uint8_t key[LM_KEY_BYTES])
{
	lm_auth *auth;

	if (sodium_init() < 0)
		return NULL;
	auth = sodium_malloc(sizeof(*auth));
	if (!auth)
		return NULL;
	memset(auth, 0, sizeof(*auth));
	memcpy(auth->master, key, sizeof(auth->master));
	auth->use_gcm = crypto_aead_aes256gcm_is_available();
	auth->use_own = own_possible(auth);
	auth->bulk_min = LM_AUTH_BULK;
	pthread_mutex_init(&auth->lock, NULL);
	return auth;
}

void lm_auth_destroy(lm_auth *auth)
{
	if (!auth)
		return;
	pthread_mutex_destroy(&auth->lock);
	for (int i = 0; i < LM_AUTH_CACHE_SLOTS; i++)
		EVP_CIPHER_CTX_free(auth->slots[i].bulk); /* cleanses */
	sodium_free(auth); /* zeroes the keys */
}

int lm_auth_key_from_file(const char *path, uint8_t key[LM_KEY_BYTES],
			  char *err, size_t errlen)
{
	uint8_t secret[LM_AUTH_SECRET_MAX + 1];
	size_t got = 0;
	ssize_t n;
	int fd;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return LM_EIO;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "secret file \"%s\": %s", path,
			 strerror(errno));
		return LM_EIO;
	}
	while (got < sizeof(secret) &&
	       (n = read(fd, secret + got, sizeof(secret) - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "secret file \"%s\": %s", path,
				 strerror(errno));
			close(fd);
			return LM_EIO;
		}
		got += (size_t)n;
	}
	close(fd);
	if (got < LM_AUTH_SECRET_MIN || got > LM_AUTH_SECRET_MAX) {
		snprintf(err, errlen,
			 "secret file \"%s\" holds %zu bytes; it needs %d to %d",
			 path, got, LM_AUTH_SECRET_MIN, LM_AUTH_SECRET_MAX);
		sodium_memzero(secret, sizeof(secret));
		return LM_EINVAL;
	}
	crypto_generichash(key, LM_KEY_BYTES, secret, got, NULL, 0);
	sodium_memzero(secret, sizeof(secret));
	return 0;
}

/* Finds or derives the key of (sender, session); caller holds the lock. */
static struct lm_auth_slot *lm_auth_slot_locked(struct lm_auth *auth,
						uint16_t sender,
						uint64_t session)
{
	static const char label[] = "lemuria datagram mac v1";
	uint64_t mix = session * 0x9e3779b97f4a7c15ull ^ sender;
	struct lm_auth_slot *s =
		&auth->slots[(mix >> 58) & (LM_AUTH_CACHE_SLOTS - 1)];
	uint8_t info[sizeof(label) + 10];

	if (s->used && s->sender == sender && s->session == session)
		return s;
	memcpy(info, label, sizeof(label));
	lm_put16(info + sizeof(label), sender);
	lm_put64(info + sizeof(label) + 2, session);
	crypto_generichash(s->key, sizeof(s->key), info, sizeof(info),
			   auth->master, sizeof(auth->master));
	if (auth->use_gcm)
		crypto_aead_aes256gcm_beforenm(&s->gcm, s->key);
	if (auth->use_own)
		lm_gmac_init(&s->own, s->key);
	s->bulk_keyed = 0;
	s->sender = sender;
	s->session = session;
	s->used = 1;
	return s;
}

/* The GMAC of dg[0..len) by OpenSSL into tag; -1 when OpenSSL fails (out of
 * memory), and the caller falls back on libsodium. */
static int lm_auth_bulk_tag(struct lm_auth_slot *s, const uint8_t *dg,
			    size_t len, const uint8_t *nonce, uint8_t *tag)
{
	int outl;

	if (!s->bulk && !(s->bulk = EVP_CIPHER_CTX_new()))
		return -1;
	if (!s->bulk_keyed) {
		if (EVP_EncryptInit_ex(s->bulk, EVP_aes_256_gcm(), NULL, s->key,
				       NULL) != 1)
			return -1;
		s->bulk_keyed = 1;
	}
	if (EVP_EncryptInit_ex(s->bulk, NULL, NULL, NULL, nonce) != 1 ||
	    EVP_EncryptUpdate(s->bulk, NULL, &outl, dg, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(s->bulk, tag, &outl) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->bulk, EVP_CTRL_GCM_GET_TAG,
				LM_WIRE_MAC_SIZE, tag) != 1)
		return -1;
	return 0;
}

/* Computes the MAC of dg[0..len) into mac, or checks it against mac. */
static int lm_auth_run(const lm_auth *cauth, const uint8_t *dg, size_t len,
		       uint8_t *mac_out, const uint8_t *mac_in)
{
	struct lm_auth *auth = (struct lm_auth *)cauth;
	uint8_t nonce[LM_AUTH_NONCE_BYTES] = { 0 };
	uint8_t none = 0; /* the empty plaintext and ciphertext */
	uint8_t tag[LM_WIRE_MAC_SIZE];
	unsigned long long maclen;
	struct lm_auth_slot *s;
	int rc;

	memcpy(nonce, dg + 28, 8); /* the stamp (wire.h) */
	pthread_mutex_lock(&auth->lock);
	s = lm_auth_slot_locked(auth, lm_get16(dg + 6), lm_get64(dg + 12));
	if (auth->use_own) {
		lm_gmac_tag(&s->own, nonce, dg, len, tag);
		if (mac_out)
			memcpy(mac_out, tag, LM_WIRE_MAC_SIZE);
		rc = mac_out ? 0
			     : sodium_memcmp(tag, mac_in, LM_WIRE_MAC_SIZE);
	} else if (auth->use_gcm && len >= auth->bulk_min &&
	    lm_auth_bulk_tag(s, dg, len, nonce, tag) == 0) {
		if (mac_out)
			memcpy(mac_out, tag, LM_WIRE_MAC_SIZE);
		rc = mac_out ? 0
			     : sodium_memcmp(tag, mac_in, LM_WIRE_MAC_SIZE);
	} else if (auth->use_gcm) {
		rc = mac_out ? crypto_aead_aes256gcm_encrypt_detached_afternm(
				       &none, mac_out, &maclen, &none, 0, dg,
				       len, NULL, nonce, &s->gcm)
			     : crypto_aead_aes256gcm_decrypt_detached_afternm(
				       &none, NULL, &none, 0, mac_in, dg, len,
				       nonce, &s->gcm);
	} else {
		rc = mac_out ? crypto_aead_chacha20poly1305_ietf_encrypt_detached(
				       &none, mac_out, &maclen, &none, 0, dg,
				       len, NULL, nonce, s->key)
			     : crypto_aead_chacha20poly1305_ietf_decrypt_detached(
				       &none, NULL, &none, 0, mac_in, dg, len,
				       nonce, s->key);
	}
	pthread_mutex_unlock(&auth->lock);
	return rc;
}

void lm_auth_sign(const lm_auth *auth, uint8_t *dg, size_t len)
{
	lm_auth_run(auth, dg, len, dg + len, NULL);
}

int lm_auth_verify(const lm_auth *auth, const uint8_t *dg, size_t len)
{
	size_t body;

	if (len < LM_WIRE_HDR_SIZE + LM_WIRE_MAC_SIZE)
		return LM_EAUTH;
	body = len - LM_WIRE_MAC_SIZE;
	return lm_auth_run(auth, dg, body, NULL, dg + body) ? LM_EAUTH : 0;
}

bool lm_auth_set_engine(lm_auth *auth, enum lm_auth_engine engine)
{
	bool own = own_possible(auth);
	bool ok = engine == LM_AUTH_AUTO || engine == LM_AUTH_SODIUM ||
		  (engine == LM_AUTH_OPENSSL && auth->use_gcm) ||
		  (engine == LM_AUTH_OWN && own);

	if (!ok)
		return false;
	pthread_mutex_lock(&auth->lock);
	/* keys derived before have no gmac.c expansion: derive them again */
	if (!auth->use_own && (engine == LM_AUTH_AUTO || engine == LM_AUTH_OWN))
		for (int i = 0; i < LM_AUTH_CACHE_SLOTS; i++)
			auth->slots[i].used = 0;
	auth->use_own = engine == LM_AUTH_OWN || (engine == LM_AUTH_AUTO && own);
	auth->bulk_min = engine == LM_AUTH_SODIUM    ? SIZE_MAX
			 : engine == LM_AUTH_OPENSSL ? 0
						     : LM_AUTH_BULK;
	pthread_mutex_unlock(&auth->lock);
	return true;
}

const char *lm_auth_construction(const lm_auth *auth)
{
	if (!auth->use_gcm)
		return "ChaCha20-Poly1305";
	return auth->use_own ? "AES-256-GCM (GMAC, VPCLMULQDQ)"
			     : "AES-256-GCM (GMAC)";
}
