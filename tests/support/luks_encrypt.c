// SPDX-License-Identifier: MIT
/*
 * luks_encrypt: write a plaintext image into the payload of a LUKS
 * container, encrypted as dm-crypt would (the tests build LUKS images in
 * user space: the kernel here has no device-mapper).
 *
 *   luks_encrypt VOLUME_KEY_FILE MODE SECTOR_SIZE PLAIN OUT OFFSET
 *
 * MODE: xts-plain64 (AES-XTS, key 32 or 64 bytes) or cbc-essiv:sha256
 * (AES-CBC, IV = AES-256-ECB_{sha256(key)}(sector)). The IV counts
 * 512-byte sectors from the payload start, also for 4096-byte sectors
 * (what cryptsetup sets up for LUKS). Straight OpenSSL, sharing no code
 * with the library, so a wrong IV rule would not cancel out; pyluksde and
 * GRUB read the same images independently.
 */
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *m)
{
	fprintf(stderr, "luks_encrypt: %s\n", m);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 7)
		die("usage: VOLUME_KEY_FILE MODE SECTOR_SIZE PLAIN OUT OFFSET");
	uint8_t key[64];
	FILE *kf = fopen(argv[1], "rb");
	if (!kf)
		die("cannot open the key file");
	size_t klen = fread(key, 1, sizeof(key), kf);
	fclose(kf);
	bool xts = strcmp(argv[2], "xts-plain64") == 0;
	if (!xts && strcmp(argv[2], "cbc-essiv:sha256") != 0)
		die("mode: xts-plain64 or cbc-essiv:sha256");
	size_t ss = strtoul(argv[3], NULL, 10);
	long long at = strtoll(argv[6], NULL, 10);
	const EVP_CIPHER *c = xts ? (klen == 64 ? EVP_aes_256_xts() : EVP_aes_128_xts())
				  : (klen == 32 ? EVP_aes_256_cbc() : EVP_aes_128_cbc());
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new(), *e = EVP_CIPHER_CTX_new();
	EVP_EncryptInit_ex(x, c, NULL, key, NULL);
	EVP_CIPHER_CTX_set_padding(x, 0);
	if (!xts) {
		uint8_t h[32];
		unsigned hl;
		EVP_Digest(key, klen, h, &hl, EVP_sha256(), NULL);
		EVP_EncryptInit_ex(e, EVP_aes_256_ecb(), NULL, h, NULL);
		EVP_CIPHER_CTX_set_padding(e, 0);
	}
	FILE *in = fopen(argv[4], "rb"), *out = fopen(argv[5], "r+b");
	if (!in || !out || fseeko(out, at, SEEK_SET) != 0)
		die("cannot open PLAIN or OUT");
	uint8_t *buf = malloc(ss);
	uint64_t sector = 0;
	size_t n;
	while ((n = fread(buf, 1, ss, in)) > 0) {
		if (n < ss)
			memset(buf + n, 0, ss - n);
		uint8_t iv[16] = { 0 };
		for (int i = 0; i < 8; i++)
			iv[i] = (uint8_t)(sector >> (8 * i));
		int l = 0;
		if (!xts)
			EVP_EncryptUpdate(e, iv, &l, iv, 16);
		EVP_EncryptInit_ex(x, NULL, NULL, NULL, iv);
		if (!EVP_EncryptUpdate(x, buf, &l, buf, (int)ss) || (size_t)l != ss)
			die("encryption failed");
		if (fwrite(buf, 1, ss, out) != ss)
			die("write failed");
		sector += ss / 512;
	}
	fclose(in);
	if (fclose(out) != 0)
		die("write failed");
	EVP_CIPHER_CTX_free(x);
	EVP_CIPHER_CTX_free(e);
	free(buf);
	return 0;
}
