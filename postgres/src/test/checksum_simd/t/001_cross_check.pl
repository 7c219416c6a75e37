
# Copyright (c) 2026, pgnvm
#
# pgnvm: page checksums written by one variant of the block function
# (src/port/pg_checksum_simd.c) verify with every other one.
#
# For each variant this machine runs: initdb and a server forced to it
# (PGNVM_CHECKSUM_IMPL) write a cluster; pg_checksums --check passes with
# every variant; test_checksum_simd --files compares every block of the
# cluster with upstream's algorithm and with its stored checksum; a server
# forced to another variant, with se2 (which verifies the pages it reads in
# place, pg_checksum_page_readonly()), reads the data back unchanged and
# without a checksum failure.  Then one byte of the table is flipped: every
# variant's pg_checksums, and that server, report the damaged block.
# Also: PGNVM_CHECKSUM_IMPL is honoured, an unknown value is refused by the
# programs and by the server as it starts.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $env = 'PGNVM_CHECKSUM_IMPL';

# the variants this process can run, narrowest first (test_checksum_simd is
# on the PATH under make installcheck)
my ($out) = run_command([ 'test_checksum_simd', '--available' ]);
my @variants = split /\n/, $out;
ok((grep { $_ eq 'scalar' } @variants), "variants here: @variants");

# the choice
{
	delete local $ENV{$env};
	command_like([ 'test_checksum_simd', '--chosen' ],
		qr/^\Q$variants[-1]\E$/, "without $env: the widest, $variants[-1]");
}
foreach my $v (@variants)
{
	local $ENV{$env} = $v;
	command_like([ 'test_checksum_simd', '--chosen' ],
		qr/^\Q$v\E$/, "$env=$v is honoured");
}
foreach my $bad ('bogus', 'AVX2', 'avx512bw')
{
	local $ENV{$env} = $bad;
	command_fails_like(
		[ 'test_checksum_simd', '--chosen' ],
		qr/invalid value for environment variable $env: "\Q$bad\E": known variants/,
		"$env=$bad is refused");
}
foreach my $missing (grep { my $v = $_; !grep { $_ eq $v } @variants }
	qw(scalar avx2 avx512))
{
	local $ENV{$env} = $missing;
	command_fails_like(
		[ 'test_checksum_simd', '--chosen' ],
		qr/lacks that variant/,
		"$env=$missing, which this CPU lacks, is refused");
}

# what every writer writes: a table larger than shared_buffers (so that the
# server writes pages back, computing their checksums), updated, vacuumed
my $fill = q{
	CREATE TABLE t (id int PRIMARY KEY, h text, pad text);
	INSERT INTO t SELECT g, md5(g::text), repeat(chr(65 + g % 26), g % 300)
		FROM generate_series(1, 40000) g;
	UPDATE t SET pad = pad || 'x' WHERE id % 7 = 0;
	DELETE FROM t WHERE id % 11 = 0;
	VACUUM ANALYZE t;
	CHECKPOINT;
};
my $seq_only =
  'SET enable_indexscan = off; SET enable_indexonlyscan = off; SET enable_bitmapscan = off;';
my $digest = qq{
	$seq_only
	SELECT count(*), sum(length(pad)), md5(string_agg(h || pad, ',' ORDER BY id))
	FROM t
};
my $by_index = q{
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*), sum(length(pad)) FROM t WHERE id BETWEEN 1000 AND 30000
};
my $failures = q{
	SELECT checksum_failures FROM pg_stat_database
	WHERE datname = current_database()
};

foreach my $writer (@variants)
{
	my $reader = $writer eq 'scalar' ? $variants[-1] : 'scalar';
	my $node = PostgreSQL::Test::Cluster->new("written_by_$writer");
	my ($expected, $expected_index, $relpath);

	{
		local $ENV{$env} = $writer;
		$node->init(force_initdb => 1);
		$node->append_conf('postgresql.conf', "shared_buffers = 1MB\n");
		$node->start;
		is($node->safe_psql('postgres', 'SHOW data_checksums'),
			'on', "written by $writer: data checksums on");
		$node->safe_psql('postgres', $fill);
		$expected = $node->safe_psql('postgres', $digest);
		$expected_index = $node->safe_psql('postgres', $by_index);
		$relpath = $node->safe_psql('postgres',
			"SELECT pg_relation_filepath('t')");
		$node->stop;
	}

	foreach my $checker (@variants)
	{
		local $ENV{$env} = $checker;
		command_like(
			[ 'pg_checksums', '--check', '-D', $node->data_dir ],
			qr/Bad checksums:\s+0\n/,
			"written by $writer, pg_checksums --check with $checker");
	}

	my @files = grep { m{/\d+(?:_(?:fsm|vm|init))?(?:\.\d+)?$} }
	  glob($node->data_dir . '/base/*/* ' . $node->data_dir . '/global/*');
	command_like(
		[ 'test_checksum_simd', '--files', @files ],
		qr/^\d+ passed, 0 failed$/m,
		"written by $writer: "
		  . scalar(@files)
		  . " relation files, every block agrees with upstream and with its stored checksum in every variant"
	);

	{
		local $ENV{$env} = $reader;
		$node->append_conf('postgresql.conf', "nvm_storage_engine = se2\n");
		$node->start;
		is($node->safe_psql('postgres', $digest),
			$expected, "written by $writer, read by $reader with se2: seq scan");
		is($node->safe_psql('postgres', $by_index),
			$expected_index,
			"written by $writer, read by $reader with se2: index scan");
		is($node->safe_psql('postgres', $failures),
			'0', "written by $writer, read by $reader: no checksum failure");
		$node->stop;
	}

	# flip one byte in the data area of block 3 of t
	{
		my $file = $node->data_dir . "/$relpath";
		open my $fh, '+<', $file or die "open $file: $!";
		binmode $fh;
		my $pos = 3 * 8192 + 5000;
		my $byte;
		sysseek($fh, $pos, 0) or die "seek: $!";
		sysread($fh, $byte, 1) == 1 or die "read: $!";
		sysseek($fh, $pos, 0) or die "seek: $!";
		syswrite($fh, chr(ord($byte) ^ 0x10)) == 1 or die "write: $!";
		close $fh;
	}
	foreach my $checker (@variants)
	{
		local $ENV{$env} = $checker;
		command_fails_like(
			[ 'pg_checksums', '--check', '-D', $node->data_dir ],
			qr/checksum verification failed in file .*, block 3:/,
			"written by $writer, a flipped byte found by pg_checksums with $checker"
		);
	}
	{
		local $ENV{$env} = $reader;
		$node->start;
		my ($ret, $stdout, $stderr) =
		  $node->psql('postgres', "$seq_only SELECT sum(length(pad)) FROM t");
		like(
			$stderr,
			qr/invalid page in block 3 of relation/,
			"written by $writer, the flipped byte found by $reader in se2");
		$node->stop;
	}
}

# the server refuses an invalid value as it starts
{
	my $node = PostgreSQL::Test::Cluster->new('bogus');
	$node->init(force_initdb => 1);
	local $ENV{$env} = 'bogus';
	ok(!$node->start(fail_ok => 1), "$env=bogus: the server does not start");
	like(
		slurp_file($node->logfile),
		qr/FATAL:  invalid value for environment variable $env: "bogus"/,
		"$env=bogus: the server says why");
}

done_testing();
